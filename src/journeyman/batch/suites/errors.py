"""The one error a suite loader raises."""


class SuiteError(ValueError):
    """A suite cannot be loaded: what is wrong, in which file or line, and what to do."""
