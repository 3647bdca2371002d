"""The window's frame: the main window, the sidebar of conversations, the welcome page, notices, the network indicator and the icon."""
