"""llama.cpp's `llama-server` as a backend: command-line flags, a supervisor, its spec."""
