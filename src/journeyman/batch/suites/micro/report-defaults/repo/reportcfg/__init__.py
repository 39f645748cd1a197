"""Settings for text reports: defaults, overrides, rendering."""

from .merge import load_config
from .render import render

__all__ = ["load_config", "render"]
