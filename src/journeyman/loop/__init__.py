"""The agent loop: a small kernel with ordered gates, and modes that build each turn."""
