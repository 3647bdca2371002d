"""Pairing two Coves with a one-time code, no account: the code's format (code.py), shared by
`cove serve pair` on the machine with the model and `cove remote pair` on the other one."""
