"""Shared core of every service: settings base, OpenAI error table, SSE helpers, app factory."""
