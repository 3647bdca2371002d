"""`cove serve`'s endpoints: the OpenAI, Anthropic and Responses APIs (the *_api.py modules), the
readers that check each request into one reply's request (the *_request.py modules, body_check.py),
what every endpoint shares (service.py: who asks, which model, one reply as a Turn), the Turn an
API request runs through (request_turn.py, running.py) and the history thread that writes it
(request_store.py). Endpoints reach the engines only through the pool's lease (app/serve/pool)."""
