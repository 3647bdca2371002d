"""Cove's test suite: tests/app, tests/models and tests/ui mirror the code; tests/e2e runs whole processes."""
