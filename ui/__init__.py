"""Cove's PySide6 window. The only package that imports Qt: app/ and models/ never do (tests/test_layering.py)."""
