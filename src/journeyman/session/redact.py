"""Removes secret values from anything we persist or print; lives in `core.redact`."""

from journeyman.core.redact import MASK, Redactor, is_secret_name

__all__ = ["MASK", "Redactor", "is_secret_name"]
