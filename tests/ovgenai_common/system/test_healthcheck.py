"""`python -m ovgenai_common.healthcheck` run against real services: it answers for a service that is up, and
reaches it directly whatever http_proxy says."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.ovgenai_common.test_healthcheck import PROXIES, Proxy, Service
from tests.support.loopback_http import LoopbackHTTP


def test_the_command_answers_for_a_real_service():
    with LoopbackHTTP(Service) as server:
        env = {**os.environ, "PORT": str(server.port), "HEALTHCHECK_TIMEOUT": "10"}
        command = [sys.executable, "-m", "ovgenai_common.healthcheck"]
        assert subprocess.run(command, env=env, capture_output=True, timeout=30).returncode == 0
        unready = subprocess.run([*command, "/ready"], env=env, capture_output=True, text=True, timeout=30)
        assert unready.returncode == 1 and "503" in unready.stderr


def test_the_command_reaches_the_service_directly_whatever_http_proxy_says():
    with LoopbackHTTP(Service) as service, LoopbackHTTP(Proxy) as proxy:
        env = {name: value for name, value in os.environ.items() if name not in PROXIES}
        env.update(PORT=str(service.port), HEALTHCHECK_TIMEOUT="10", http_proxy=proxy.url, HTTP_PROXY=proxy.url)
        done = subprocess.run([sys.executable, "-m", "ovgenai_common.healthcheck"], env=env, capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert Proxy.asked == []
