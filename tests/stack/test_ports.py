"""ports.py without a server (the unit tier may bind but not listen): a port bound by someone else is taken, a free
one is not, a free one is suggested after a taken one, and a process's session is read from /proc even when its
command holds spaces and parentheses. Real listeners, foreign and ours: system/test_ports.py."""

from __future__ import annotations

import os
import socket

from ovgenai_services.stack import ports


def test_a_bound_port_is_taken_and_the_next_free_one_is_suggested():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))  # no SO_REUSEADDR: nobody else may bind it
        port = holder.getsockname()[1]
        assert ports.taken("127.0.0.1", port)
        suggested = ports.free_port_after("127.0.0.1", port)
        assert suggested is not None and suggested > port and not ports.taken("127.0.0.1", suggested)
    assert not ports.taken("127.0.0.1", port)


def test_the_session_of_a_process_is_read_whatever_its_name(monkeypatch):
    assert ports._session_of(os.getpid()) == os.getsid(0)

    class Stat:
        def __init__(self, _path):
            pass

        def read_text(self):
            return "4242 (python3 -m x (y) z) S 1 4242 4241 0 -1 4194560"

    monkeypatch.setattr(ports, "Path", Stat)
    assert ports._session_of(4242) == 4241
