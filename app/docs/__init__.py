"""Documents: collections of the person's folders and files, read, cut into passages, indexed in a
SQLite file of their own (documents.db, beside the history) and searched for a turn's sources."""
