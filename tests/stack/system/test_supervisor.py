"""The supervisor's restart policy, on real (tiny) processes: fail fast at start-up, restart with backoff once
up, give up on a service that keeps dying."""

from __future__ import annotations

import pytest

from ovgenai_services.stack.services import Service
from ovgenai_services.stack.supervisor import ServiceDied, Supervisor
from tests.support.servers import free_port

# Starts processes, servers or real pipelines: the system tier (not make test-unit).

# `python -m json.tool` on a missing file exits at once with code 2: a service that cannot start.
CRASHING = Service("crasher", "json.tool", free_port(), "/health", args=["/nonexistent/input.json"])


def test_a_service_that_keeps_dying_is_restarted_with_backoff_then_given_up(capsys):
    supervisor = Supervisor([CRASHING], color=False, max_restarts=3, first_backoff=0.01)
    supervisor.start(CRASHING, 0)
    with pytest.raises(ServiceDied) as died:
        supervisor.watch(interval=0.01)
    assert died.value.code == 2
    assert supervisor.restarts["crasher"].total == 3
    out = capsys.readouterr().out
    assert out.count("crasher exited with code 2") == 3 and "restarting crasher (restart 3)" in out
    assert "3 restart(s) so far, 2 in a row without becoming healthy" in out


def test_a_death_during_start_up_stops_at_once():
    supervisor = Supervisor([CRASHING], color=False)
    supervisor.start(CRASHING, 0)
    with pytest.raises(ServiceDied):
        supervisor.wait_healthy(CRASHING, timeout=30)
    assert supervisor.restarts["crasher"].total == 0
