"""Bridges to outside services: language servers and MCP servers that lend the agent tools, and
an OpenTelemetry collector that receives its traces, and Harbor, which runs journeyman as its
installed agent (`harbor_agent.py`, imported by Harbor only)."""
