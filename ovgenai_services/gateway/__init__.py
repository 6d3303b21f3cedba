"""The RAG gateway (OPEA ChatQnA): ingestion, retrieval and answering with LangChain over OpenAI endpoints."""
