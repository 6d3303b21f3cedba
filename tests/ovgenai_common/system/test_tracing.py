"""Without an OTLP endpoint a real service traces nothing."""

from __future__ import annotations

from tests.ovgenai_common.test_tracing import spans_made


def test_without_an_endpoint_nothing_is_traced():
    assert spans_made(None) == "[]"
