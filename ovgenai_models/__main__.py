"""`python -m ovgenai_models <task> ...`: prepare models for the stack (cli.py)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
