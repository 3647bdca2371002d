"""`cove serve`: Cove's engine behind the OpenAI, Anthropic and Responses APIs on this computer, in
three rooms: `http/` (the server, its connections, who gets in, errors), `api/` (the endpoints and
the request readers) and `pool/` (the engines, leased fairly, loaded where memory fits).
Imports go http -> api -> pool (tests/test_layering.py)."""
