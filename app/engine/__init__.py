"""Cove's inference engine: a child process that owns llama.cpp (host/main.py, host/session.py)
and the parent's client for it (client.py), speaking the line protocol in protocol.py.

Only the client side is imported by the rest of the app; llama_cpp is imported by the host
process alone, so a native crash there never takes the window or the history with it.
"""
