"""Shared fixtures: the real backend on the default model, started once per session."""

from __future__ import annotations

import time

import pytest

from tests.support import isolation
from tests.support.servers import DEFAULT_MODEL, MODELS, RemoteServer, llm_microservice

STARTED = pytest.StashKey[float]()


def pytest_addoption(parser):
    parser.addoption("--containers", action="store_true",
                     help="run tests/containers: build every image and run the compose stack (make test-containers)")
    parser.addoption("--time-budget", type=float, default=None, metavar="SECONDS",
                     help="fail the run when it takes longer (make test-unit: the unit tier is run on every save)")


def pytest_sessionstart(session):
    session.config.stash[STARTED] = time.monotonic()


def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001 - the hook's signature
    """The whole run against --time-budget, in the process that runs the session (not in xdist's workers)."""
    budget = session.config.getoption("--time-budget")
    if budget is None or hasattr(session.config, "workerinput"):
        return
    took = time.monotonic() - session.config.stash[STARTED]
    if took > budget:
        session.config.get_terminal_writer().line(
            f"the run took {took:.0f} s, past its budget of {budget:g} s: find the slow tests with --durations=20",
            red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_ignore_collect(collection_path, config):
    """The container tests build images and run the stack for ~10 minutes: only `make test-containers` runs them."""
    if collection_path.name == "containers" and collection_path.parent.name == "tests":
        return not config.getoption("--containers")
    return None


SYSTEM_FOLDERS = {"system", "containers"}  # a test is a system test by where it lives, and only so


def pytest_collection_modifyitems(items):
    """A test under a system/ folder (or tests/containers) is a system test, and no other: the marker is the folder's,
    never a test's own. The files with system tests run first: xdist hands each worker a whole file at a time (--dist
    loadfile), and the many short unit files left at the end keep both workers busy until the last one, where a long
    system file would hold one alone."""
    misplaced = sorted({item.nodeid.split("::")[0] for item in items
                        if item.get_closest_marker(isolation.MARKER) is not None
                        and not SYSTEM_FOLDERS & set(item.nodeid.split("::")[0].split("/"))})
    if misplaced:
        raise pytest.UsageError(f"system tests live under a system/ folder, not marked elsewhere: {misplaced}")
    for item in items:
        if SYSTEM_FOLDERS & set(item.nodeid.split("::")[0].split("/")):
            item.add_marker(pytest.mark.system)
    system_files = {item.path for item in items if item.get_closest_marker(isolation.MARKER) is not None}
    items.sort(key=lambda item: item.path not in system_files)  # stable: each file's order is kept


# The suite's fixtures that read the prepared models or start the services on them.
MODEL_FIXTURES = {"default_model", "backend", "embedding_service", "llm_service"}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001 - the hook's signature
    """The unit tier's promise (make test-unit): a test without the system marker that starts a process, a server
    or a pipeline fails, saying so; its fixtures' set-up and tear-down included."""
    if item.get_closest_marker(isolation.MARKER) is not None:
        return (yield)
    with pytest.MonkeyPatch.context() as patch:
        isolation.forbid(patch)
        return (yield)


@pytest.fixture(autouse=True)
def _unit_tests_use_no_model(request):
    if request.node.get_closest_marker(isolation.MARKER) is None:
        models = sorted(set(request.fixturenames) & MODEL_FIXTURES)
        if models:
            raise isolation.StartsSomething(f"this test uses {', '.join(models)} (a prepared model or a real "
                                            f"server): mark it @pytest.mark.{isolation.MARKER}")


@pytest.fixture(autouse=True)
def _the_shared_engine_survives(request):
    """A test on the session's backend must not take its engine down: the tests after it would meet 503s while it
    restarts and fail in its place, passing when run alone. Checked around every test that uses it, so the failure
    names the test that did it."""
    server = request.getfixturevalue("backend") if "backend" in request.fixturenames else None
    if not isinstance(server, RemoteServer) or server.module != "ovgenai_server":
        yield
        return
    from tests.ovgenai_server.system.helpers import metric

    before = metric(server.url, "ovgenai:engine_restarts_total")
    yield
    restarts = metric(server.url, "ovgenai:engine_restarts_total") - before
    assert restarts == 0, f"the shared backend's engine restarted {restarts:.0f} time(s) during this test"


@pytest.fixture(scope="session")
def default_model() -> str:
    if not (MODELS / DEFAULT_MODEL / "openvino_model.xml").is_file():
        pytest.fail("default models are missing; run `make models` (make test does it)")
    return DEFAULT_MODEL


@pytest.fixture(scope="session")
def backend(default_model):  # noqa: ARG001 - depends on the model being prepared
    """The backend as users start it, on the default model repository (the KV cache sized at start)."""
    with RemoteServer("ovgenai_server", ["--model", str(MODELS), "--max_n", "4"],
                      env={"VLLM_OPENVINO_KVCACHE_SPACE": "0"}) as server:
        yield server


@pytest.fixture(scope="session")
def embedding_service():
    folder = MODELS / "sentence-transformers/all-MiniLM-L6-v2"
    if not (folder / "openvino_model.xml").is_file():
        pytest.fail("default embedding model missing; run `make models`")
    with RemoteServer("ovgenai_services.embedding", env={"EMBEDDING_MODEL_PATH": str(folder)}) as server:
        yield server


@pytest.fixture(scope="session")
def llm_service(backend, default_model):
    with llm_microservice(backend.url, default_model) as server:
        yield server


def gateway_env(embedding_url: str, llm_url: str, data_dir, **extra: str) -> dict[str, str]:
    return {"EMBEDDING_SERVER_ENDPOINT": embedding_url, "LLM_SERVER_ENDPOINT": llm_url, "DATA_DIR": str(data_dir),
            **extra}
