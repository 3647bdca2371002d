"""The window's Server switch: the API server of `cove serve` run from the window, its live
requests and loaded models, and the API keys of its clients."""
