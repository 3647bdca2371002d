"""The performance panel: the speed chart, the turn's figures and the memory poller."""
