"""What runs in the engine process: its start (autotune, the pipeline built and warmed
up), the loop that steps the pipeline, each request's GenerationConfig, grammars compiled
off the step, prefix-aware admission, the model file's pages released."""
