"""The served models: what each is (its facts, prompt builder and runtime), the specs read from the
repository, LoRA adapters, sources to prepare, devices, and the models kept in step with the repository."""
