"""`python -m ovgenai_services.embedding`: OpenAI and TEI embeddings on port 6000."""

from ovgenai_common.app import serve_from_cli

from .app import create_app
from .settings import EmbeddingSettings

if __name__ == "__main__":
    serve_from_cli(EmbeddingSettings, create_app)
