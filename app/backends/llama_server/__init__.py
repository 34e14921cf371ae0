"""llama.cpp's llama-server as a backend: OpenAI-style chat API, /metrics and /slots, command-line flags, GGUF files."""
