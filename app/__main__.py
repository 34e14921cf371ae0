"""`python -m app` runs the same entry point as the `ollama-deck` command."""

from app.cli import main

raise SystemExit(main())
