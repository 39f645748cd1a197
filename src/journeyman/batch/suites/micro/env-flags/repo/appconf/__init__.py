"""Application settings from environment variables."""

from .settings import Settings, load_settings

__all__ = ["Settings", "load_settings"]
