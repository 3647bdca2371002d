"""The Tools page: the person's own tool servers (MCP), their tools, and the always-allow rules."""
