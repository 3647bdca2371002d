"""Tool servers (MCP): the person's own programs and local HTTP servers, reached through the
official `mcp` SDK on an asyncio thread of its own, each call behind the approval gate."""
