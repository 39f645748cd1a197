"""Ways for other programs to drive or observe journeyman: ACP, an MCP server, OpenTelemetry."""
