"""Images a turn carries: the bytes checked against Cove's limits and decoded to RGB pixels, and inline image data read from the APIs."""
