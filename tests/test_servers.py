"""The test servers' ports (tests/support/servers.py): each xdist worker picks from a block of its own below the
kernel's ephemeral range, where no outgoing connection's source port can take a port before its server binds it."""

from __future__ import annotations

import pytest

from tests.support.servers import PORTS_PER_WORKER, worker_ports


@pytest.mark.parametrize(("worker", "block"), [(None, range(31768, 32768)), ("gw0", range(31768, 32768)),
                                               ("gw1", range(30768, 31768)), ("gw12", range(19768, 20768))])
def test_each_worker_has_its_own_block_below_the_ephemeral_range(worker, block):
    assert worker_ports(32768, worker) == block and len(block) == PORTS_PER_WORKER


def test_blocks_never_reach_the_privileged_ports():
    assert worker_ports(1500, "gw0") == range(1024, 1500)
    assert worker_ports(1500, "gw3") == range(1024, 1024)  # empty: free_port falls back to any free port
