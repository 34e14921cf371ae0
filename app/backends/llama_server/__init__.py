"""llama.cpp's llama-server as a backend: its OpenAI-style API, /metrics, /slots and command-line flags."""
