"""Remote connections: chatting with models on the person's own servers (vLLM, llama-server,
Ollama, llama-cpp-python's server, another Cove) over the OpenAI-compatible HTTP API, through
the same network gate as Hub calls, with keys in the keyring and every fault a sentence."""
