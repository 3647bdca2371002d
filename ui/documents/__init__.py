"""The window's documents: the Documents page, indexing off the UI thread, the conversation's
collections chip and the sources under a reply."""
