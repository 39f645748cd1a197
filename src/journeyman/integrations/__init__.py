"""Bridges to outside services: language servers and MCP servers that lend the agent tools, and
an OpenTelemetry collector that receives its traces."""
