"""The one error a suite loader raises."""

from journeyman.core.errors import ConfigurationError


class SuiteError(ConfigurationError):
    """A suite cannot be loaded: what is wrong, in which file or line, and what to do."""
