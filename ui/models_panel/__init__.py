"""The Models panel: discover, search, files, installed and downloads views, the Hub worker, settings and import."""
