"""llama.cpp's `llama-server` as a backend: command-line flags, a supervisor, its OpenAI-style API, /metrics and /slots."""
