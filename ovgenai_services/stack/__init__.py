"""The one-command native stack: `python -m ovgenai_services.stack up` (what `make run` calls)."""
