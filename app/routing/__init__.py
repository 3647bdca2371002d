"""Choosing the model for a request ("Auto", issue 53): what kind of task it is and how hard."""
