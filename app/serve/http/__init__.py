"""`cove serve`'s HTTP side: the ASGI app and its routes (server.py), how uvicorn runs it (serving.py,
runner.py for the window), the connections' bounds (connections.py, nodelay.py), who gets in (the
Host header, browsers, the keys, the peer's account: http.py, browser_guard.py, keys.py,
peer_owner.py), this machine's TLS certificate off loopback (tls.py) and the errors in the APIs'
shapes (errors.py)."""
