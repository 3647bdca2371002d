"""Cove's Qt-free core: engine client and host, chat assembly, history store, paths, command line."""

__version__ = "0.1.0"
