"""Turning a message's text into a safe, laid-out document: markdown rendering and the document that never fetches."""
