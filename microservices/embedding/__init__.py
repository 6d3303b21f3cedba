"""The embedding microservice: OpenAI /v1/embeddings and TEI /embed on openvino_genai.TextEmbeddingPipeline."""
