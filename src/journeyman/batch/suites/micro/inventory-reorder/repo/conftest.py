"""Makes the project importable from the tests (pytest puts this folder on sys.path)."""
