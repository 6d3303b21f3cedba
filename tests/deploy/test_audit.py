"""`make audit`'s exceptions: each one says why, and the committed list is well formed."""

from __future__ import annotations

import importlib.util

import pytest

from tests.support.servers import ROOT

spec = importlib.util.spec_from_file_location("audit", ROOT / "scripts/audit.py")
audit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(audit)


def test_the_committed_exceptions_are_well_formed():
    for ident, reason in audit.exceptions(ROOT / "audit-exceptions.txt").items():
        assert ident and reason


def test_an_exception_without_a_reason_stops_the_audit(tmp_path):
    listed = tmp_path / "exceptions.txt"
    listed.write_text("# header\nGHSA-aaaa-bbbb-cccc  # the vulnerable parser is never given untrusted input\n")
    assert audit.exceptions(listed) == {"GHSA-aaaa-bbbb-cccc": "the vulnerable parser is never given untrusted input"}
    listed.write_text("PYSEC-2024-1\n")
    with pytest.raises(SystemExit, match="has no reason"):
        audit.exceptions(listed)
