"""Build URLs for a JSON API."""

from .client import Client
from .urls import join_url

__all__ = ["Client", "join_url"]
