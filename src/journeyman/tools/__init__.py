"""The `Tool` protocol, the registry, the built-in tools and workspace confinement."""
