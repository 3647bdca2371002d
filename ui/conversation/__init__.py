"""Showing a conversation: the list view, its item model, the row delegate and layout, and the link policy."""
