"""Model preparation: OVMS-style model repositories (config.json + graph.pbtxt per model) and the defaults."""
