"""Model adapters behind one `Provider` protocol."""
