"""The Connections tab of the Models panel (the person's own servers: add, test, list their
models, remove) and the one question asked before messages first go to a non-private host."""
