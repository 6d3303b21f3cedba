"""`python -m ovgenai_common.healthcheck PATH`: exit 0 when this container's service answers PATH with 200.

The images' HEALTHCHECK, compose and the launch scripts all run this one command, so "healthy" means the same
thing everywhere: the endpoint a user or an orchestrator would probe answers. Standard library only: it runs in
every image, and starts fast enough to run every few seconds. It asks the service on loopback directly, never
through a proxy the environment names (http_proxy, which a corporate network's containers carry for downloads).
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.error
import urllib.request

# No proxies: urlopen sends even 127.0.0.1 to http_proxy unless no_proxy names it, and a proxy cannot reach this
# container's loopback (a 502 or a timeout: a healthy service marked unhealthy). A service serving TLS (SSL_CERTFILE)
# is asked over https on loopback, where its certificate names another host: it is not checked.
_LOOPBACK_TLS = ssl.create_default_context()
_LOOPBACK_TLS.check_hostname, _LOOPBACK_TLS.verify_mode = False, ssl.CERT_NONE
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                     urllib.request.HTTPSHandler(context=_LOOPBACK_TLS))


def main(argv: list[str]) -> int:
    path = argv[0] if argv else "/health"
    scheme = "https" if os.environ.get("SSL_CERTFILE") else "http"
    url = f"{scheme}://127.0.0.1:{os.environ.get('PORT', '8000')}{path}"
    try:
        with DIRECT.open(url, timeout=float(os.environ.get("HEALTHCHECK_TIMEOUT", "2.5"))) as response:
            return 0 if response.status == 200 else 1
    except (OSError, ValueError) as error:  # refused, timed out, or an HTTP error status (HTTPError is an OSError)
        sys.stderr.write(f"{url}: {error}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
