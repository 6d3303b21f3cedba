"""`python -m ovgenai_services.llm`: the OPEA LLM microservice on port 9000."""

from ovgenai_common.app import serve_from_cli

from .app import create_app
from .settings import LLMSettings

if __name__ == "__main__":
    serve_from_cli(LLMSettings, create_app)
