"""Cove's PySide6 window. The only package that imports Qt (see DESIGN.md section 1)."""
