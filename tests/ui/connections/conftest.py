"""The remote-connection window tests' fixtures (tests/support/remote_window.py): llama-cpp-python's
server on the tiny model, one per test module, and an in-memory keyring."""

from tests.support.remote_window import keyring_backend, server  # noqa: F401 - fixtures
