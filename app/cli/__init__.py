"""The `cove` command line: the same core the window uses, driven from a terminal."""
