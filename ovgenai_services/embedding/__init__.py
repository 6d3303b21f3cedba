"""The embedding microservice: OpenAI /v1/embeddings and TEI /embed on OpenVINO (embedder.py), reranking on
openvino_genai.TextRerankPipeline."""
