"""A TorchServe LLM-API front on the backend's engine: `POST /predictions/{model}` streamed, gRPC
`InferenceAPIsService.StreamPredictions`, the management and metrics ports, and the LLM-API's environment names.
It is the same server (engine, validation, continuous batching, metrics) behind another wire format."""
