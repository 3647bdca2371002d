"""The engines behind `cove serve`: one engine process per model with its slots (engines.py), leased
to requests through a queue fair across clients (pool.py, fair_queue.py), loaded where the memory
fits (machine.py, memory_fit.py), unloaded when idle (idle_ttl.py), and the window's own engine
shared with the API while the server runs in the window (window_share.py, window_gate.py)."""
