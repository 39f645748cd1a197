"""Bridges to outside services that lend the agent tools: language servers and MCP servers."""
