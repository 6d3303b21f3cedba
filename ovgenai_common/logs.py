"""Logging for every service: plain text lines, or one JSON object per line (LOG_FORMAT=json) for log collectors;
either way each line written while a request is served knows that request's id (request_context.py), and a JSON
line written inside a traced span (tracing.py) names its trace and span, so that a log line and its trace lead to
each other."""

from __future__ import annotations

import logging
from typing import Literal

from opentelemetry import trace

from .request_context import current_request_id

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The JSON object's keys: python-json-logger names them after the record's attributes.
JSON_FIELDS = ("asctime", "levelname", "name", "message", "request_id", "trace_id", "span_id")
# The HTTP clients' own per-call lines are noise at INFO: one line per request is ours to write.
NOISY_LOGGERS = ("httpx", "httpx2", "httpcore", "chromadb", "openai")


class RequestIdFilter(logging.Filter):
    """Puts the id of the request being served on each record (None outside a request), and the ids of the current
    span and its trace as OTLP collectors write them (hex; None outside a span, and always when tracing is off)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id()
        span = trace.get_current_span().get_span_context()
        record.trace_id, record.span_id = (
            (format(span.trace_id, "032x"), format(span.span_id, "016x")) if span.is_valid else (None, None)
        )
        return True


def formatter(log_format: LogFormat) -> logging.Formatter:
    if log_format == "json":
        from pythonjsonlogger.json import JsonFormatter

        return JsonFormatter(list(JSON_FIELDS), rename_fields={"asctime": "time", "levelname": "level",
                                                               "name": "logger"})
    return logging.Formatter(TEXT_FORMAT)


def setup_logging(level: str, log_format: LogFormat = "text") -> None:
    """The root logger's one handler, on stderr, in the given format, with each record's request id."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format))
    handler.addFilter(RequestIdFilter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
