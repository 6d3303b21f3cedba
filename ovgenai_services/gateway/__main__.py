"""`python -m ovgenai_services.gateway`: the ChatQnA gateway and chat page on port 8888."""

from ovgenai_common.app import serve_from_cli

from .app import create_app
from .settings import GatewaySettings

if __name__ == "__main__":
    serve_from_cli(GatewaySettings, create_app)
