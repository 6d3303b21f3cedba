"""Logging for every service (ovgenai_common/logs.py): one handler on the root logger, text or one JSON object per
line, each record knowing the request it was written for and, inside a traced span, its trace and span; the HTTP
clients' per-call lines kept quiet."""

from __future__ import annotations

import contextvars
import json
import logging
import re

import pytest
from opentelemetry.sdk.trace import TracerProvider

from ovgenai_common import request_context
from ovgenai_common.logs import NOISY_LOGGERS, RequestIdFilter, formatter, setup_logging


@pytest.fixture
def root():
    """The root logger, put back as the test runner had it."""
    logger = logging.getLogger()
    handlers, level = logger.handlers[:], logger.level
    noisy = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)
    for name, noisy_level in noisy.items():
        logging.getLogger(name).setLevel(noisy_level)


def record(message: str = "served") -> logging.LogRecord:
    return logging.LogRecord("ovgenai.test", logging.INFO, __file__, 1, message, None, None)


def filtered(within_request: str | None = None) -> logging.LogRecord:
    """A record passed through the filter, written while the request `within_request` was served."""

    def write() -> logging.LogRecord:
        if within_request is not None:
            request_context._request_id.set(within_request)
        written = record()
        assert RequestIdFilter().filter(written)
        return written

    return contextvars.copy_context().run(write)


def test_a_record_knows_its_request_and_none_outside_one():
    assert filtered("req-7").request_id == "req-7"
    assert filtered().request_id is None


def test_a_record_inside_a_span_names_its_trace_and_span():
    outside = filtered()
    assert (outside.trace_id, outside.span_id) == (None, None)
    with TracerProvider().get_tracer("test").start_as_current_span("work") as span:
        inside = filtered()
    context = span.get_span_context()
    assert inside.trace_id == format(context.trace_id, "032x") and len(inside.trace_id) == 32
    assert inside.span_id == format(context.span_id, "016x") and len(inside.span_id) == 16


def test_a_json_line_is_one_object_under_the_collectors_names():
    line = json.loads(formatter("json").format(filtered("req-8")))
    assert {"time", "level", "logger", "message", "request_id", "trace_id", "span_id"} <= line.keys()
    assert (line["level"], line["logger"], line["message"], line["request_id"]) == ("INFO", "ovgenai.test", "served",
                                                                                     "req-8")


def test_a_text_line_is_time_level_logger_and_message():
    line = formatter("text").format(record("hello"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO ovgenai.test: hello", line), line


def test_setup_leaves_one_handler_with_the_request_ids_at_the_level(root):
    root.addHandler(logging.NullHandler())
    setup_logging("debug", "json")
    [handler] = root.handlers
    assert isinstance(handler, logging.StreamHandler) and root.level == logging.DEBUG
    assert any(isinstance(f, RequestIdFilter) for f in handler.filters)
    assert json.loads(handler.format(filtered("req-9")))["request_id"] == "req-9"


def test_the_http_clients_lines_are_warnings_at_least(root):
    setup_logging("INFO")
    assert all(logging.getLogger(name).level == logging.WARNING for name in NOISY_LOGGERS)
    setup_logging("ERROR")
    assert all(logging.getLogger(name).level == logging.ERROR for name in NOISY_LOGGERS)
    assert root.level == logging.ERROR
