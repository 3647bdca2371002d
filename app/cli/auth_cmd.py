"""`cove auth login|status|logout`; being written (issue 4)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `cove auth`."""
