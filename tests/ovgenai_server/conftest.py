"""The backend's shared fixtures: the official `openai` client of the session's backend."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client(backend):
    return backend.openai_client()
