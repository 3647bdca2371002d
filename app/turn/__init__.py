"""One chat turn, whoever asks for it: messages and settings in, a `Backend` (a model of this
machine or one on the person's server) underneath, events out, the history and the record
written through a `TurnWriter`. The window and `cove chat` drive turns through `Turn`."""
