"""Ways for other programs to drive journeyman: an ACP agent and an MCP server."""
