"""The unit tier's guard (tests/support/isolation.py) refuses what only a system test may do, naming it."""

from __future__ import annotations

import multiprocessing
import socket
import subprocess

import numpy as np
import pytest

from tests.support.isolation import StartsSomething


def test_a_unit_test_cannot_start_a_process():
    with pytest.raises(StartsSomething, match="starts a process"):
        subprocess.run(["true"], check=True)
    with pytest.raises(StartsSomething, match="multiprocessing"):
        multiprocessing.get_context("spawn").Process(target=print).start()


def test_a_unit_test_cannot_listen():
    with socket.socket() as server, pytest.raises(StartsSomething, match="listens on a socket"):
        server.bind(("127.0.0.1", 0))
        server.listen()


def test_a_unit_test_cannot_build_a_pipeline(tmp_path):
    openvino_genai = pytest.importorskip("openvino_genai")
    with pytest.raises(StartsSomething, match="real pipeline"):
        openvino_genai.LLMPipeline(str(tmp_path), "CPU")


def test_a_unit_test_cannot_read_a_prepared_model_but_may_build_its_own(tmp_path):
    openvino = pytest.importorskip("openvino")
    from tests.support.servers import MODELS

    with pytest.raises(StartsSomething, match="reads the prepared model"):
        openvino.Core().read_model(str(MODELS / "any" / "openvino_model.xml"))
    import openvino.opset13 as ops

    parameter = ops.parameter([1], np.float32)
    openvino.save_model(openvino.Model([ops.relu(parameter)], [parameter]), tmp_path / "fake.xml")
    assert openvino.Core().compile_model(str(tmp_path / "fake.xml"), "CPU") is not None
