"""Drawing a reply while it streams: the newest words placed and painted without re-laying out the whole message."""
