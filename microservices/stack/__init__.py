"""The one-command native stack: `python -m microservices.stack up` (what `make run` calls)."""
