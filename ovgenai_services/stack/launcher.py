"""`up`: prepare the configured models if needed (LLM_MODEL_ID, EMBEDDING_MODEL_ID, RERANK_MODEL_ID; the defaults
offline), start backend, embedding, LLM microservice and gateway in order, wait for each health check, print the
URLs, stream the logs; Ctrl-C stops it all. A service that dies during start-up stops the stack with a non-zero
exit; once up, a service that dies is restarted with backoff, and one that keeps dying stops the stack. A port
another program holds stops the stack before anything starts, naming the port, the program and the variable that
moves the service (GATEWAY_PORT, ...); a health check counts only from the process started for it (ports.py)."""

from __future__ import annotations

import os
import signal
import sys

from ovgenai_common.security import is_loopback

from . import ports
from .services import Service, StackSettings, no_proxy_for_loopback, plan
from .supervisor import PortTaken, ServiceDied, Supervisor, host_of, port_taken_message


def prepare(settings: StackSettings) -> None:
    """What is named, as compose's models service prepares it (the same function): left alone when prepared. A
    model that must be converted is converted where the conversion tools live (ovgenai_models/handoff.py)."""
    from ovgenai_models.handoff import prepare_models_with_tools

    prepare_models_with_tools(settings.models, settings.llm_model_id, settings.llm_model_revision,
                              settings.gguf_filename, settings.embedding_model_id, settings.embedding_model_revision,
                              settings.rerank_model_id, settings.rerank_model_revision, settings.llm_draft_model_id)


def access(settings: StackSettings) -> str:
    if settings.api_key:
        return "every route but the probes needs the API key (API_KEY)"
    if is_loopback(settings.host):
        return f"no API key: the services listen on {settings.host}, for this machine only"
    return f"WARNING: no API key while listening on {settings.host}: anyone who reaches it can use it; set API_KEY"


def banner(settings: StackSettings) -> str:
    """What the stack says once every service is healthy: where each one answers, and a request to try."""
    g, llm, b, e = settings.gateway_port, settings.llm_port, settings.backend_port, settings.embedding_port
    key = " -H \"Authorization: Bearer $API_KEY\"" if settings.api_key else ""
    return "\n".join([
        "stack    | all services are healthy",
        f"stack    |   chat page (RAG):      http://localhost:{g}/",
        f"stack    |   RAG, OpenAI API:      http://localhost:{g}/v1/chat/completions",
        f"stack    |   LLM microservice:     http://localhost:{llm}/v1/chat/completions",
        f"stack    |   backend (OpenAI/OVMS): http://localhost:{b}/v3/chat/completions",
        f"stack    |   embeddings:           http://localhost:{e}/v1/embeddings",
        f"stack    | {access(settings)}",
        "stack    | try:",
        f"stack    |   curl http://localhost:{llm}/v1/chat/completions{key} "
        "-H 'Content-Type: application/json' "
        "-d '{\"messages\": \"What is Deep Learning?\", \"max_tokens\": 17, \"stream\": false}'",
        "stack    | Ctrl-C stops everything.",
    ])


def start_in_order(supervisor: Supervisor, services: list[Service], timeout: float) -> None:
    """Each service once those it comes after are healthy; then until every one is."""
    for index, service in enumerate(services):
        for dependency in service.after:
            supervisor.wait_healthy(next(s for s in services if s.name == dependency), timeout)
        supervisor.say(f"stack    | starting {service.name} on port {service.port}")
        supervisor.start(service, index)
    for service in services:
        supervisor.wait_healthy(service, timeout)


def stop_on_signals() -> None:
    """Ctrl-C and SIGTERM stop the stack. Installed explicitly for both: a launcher started in the background by a
    script inherits SIGINT as ignored, and Python then leaves it ignored, so Ctrl-C (or `kill -INT`) would not stop
    the stack."""
    def interrupt(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)


def taken_ports(services: list[Service]) -> list[str]:
    """What stops each service whose port another program holds, before anything starts (or is prepared)."""
    return [port_taken_message(s) for s in services if ports.taken(host_of(s), s.port)]


def up(settings: StackSettings) -> int:
    """The exit code: 0 when stopped by Ctrl-C, 1 when a service died, never became healthy or found its port
    taken, 2 when the models could not be prepared."""
    from ovgenai_models.errors import ExportError

    os.environ.update(no_proxy_for_loopback(dict(os.environ)))  # the health checks go to 127.0.0.1, not a proxy
    try:
        services = plan(settings)  # a reference that names no model fails here, before anything is prepared
    except ExportError as error:
        print(f"stack    | cannot prepare the models: {error}", file=sys.stderr)  # noqa: T201 - the launcher's own output
        return 2
    busy = taken_ports(services)
    for message in busy:
        print(f"stack    | {message}", file=sys.stderr)  # noqa: T201
    if busy:
        return 1
    try:
        if settings.prepare_models:
            prepare(settings)
    except ExportError as error:
        print(f"stack    | cannot prepare the models: {error}", file=sys.stderr)  # noqa: T201
        return 2
    supervisor = Supervisor(services)
    stop_on_signals()
    try:
        start_in_order(supervisor, services, settings.startup_timeout)
        supervisor.say(banner(settings))
        supervisor.watch()
    except ServiceDied as died:
        gave_up = supervisor.restarts[died.service.name].total
        supervisor.say(f"stack    | {died.service.name} died (exit code {died.code})"
                       + (f" after {gave_up} restart(s); giving up" if gave_up else "") + "; its last lines:")
        for line in died.tail[-15:]:
            supervisor.say(f"stack    |   {line}")
        if any(busy in line.lower() for line in died.tail for busy in ("address already in use", "is in use by")):
            supervisor.say(f"stack    | {port_taken_message(died.service)}")
        supervisor.stop_all()
        supervisor.say("stack    | stopped the other services")
        return 1
    except (TimeoutError, PortTaken) as error:
        supervisor.say(f"stack    | {error}")
        supervisor.stop_all()
        supervisor.say("stack    | stopped the other services")
        return 1
    except KeyboardInterrupt:
        supervisor.say("stack    | stopping…")
        supervisor.stop_all()
        supervisor.say("stack    | stopped")
        return 0
    return 0
