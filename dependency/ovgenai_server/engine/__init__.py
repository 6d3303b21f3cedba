"""The engine seam (interface.py: a prompt builder and a runtime per model), the OpenVINO implementation of both,
and the engine process it runs on."""
