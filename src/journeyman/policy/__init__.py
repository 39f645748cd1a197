"""Permission checks and lifecycle hooks consulted before and after tool calls."""
