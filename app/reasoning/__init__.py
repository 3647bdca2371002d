"""Reasoning kept apart from the answer: which way a chat template thinks (`style.py`), how a
request's switch reaches the template (`switch.py`), and a reply split into its reasoning and its
content, whole or while it streams (`split.py`). Qt-free and llama.cpp-free: the engine host reads
the style and renders the switch; the turn and the API split the reply."""
