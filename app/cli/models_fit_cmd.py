"""`cove models ...` subcommands for the Hub (fit); being written (issue 4)."""

from __future__ import annotations

import argparse


def add_subcommands(msub: argparse._SubParsersAction) -> None:
    """Register this module's `cove models` subcommands."""
