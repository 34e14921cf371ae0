"""Any server that streams OpenAI-style /v1/chat/completions: vLLM, SGLang, TGI, LM Studio, llama-server, Ollama."""
