"""The one error a suite loader raises, and the one reading of a suite's `image` field."""

from typing import Any

from journeyman.core.errors import ConfigurationError


class SuiteError(ConfigurationError):
    """A suite cannot be loaded: what is wrong, in which file or line, and what to do."""


def suite_image(value: Any, where: str) -> str | None:
    """A suite record's optional `image` (the container image its task runs in), checked."""
    from journeyman.batch.task_file import check_image

    if value is None:
        return None
    if not isinstance(value, str):
        raise SuiteError(f"{where}: image must be a string naming a container image")
    try:
        return check_image(value)
    except ValueError as error:
        raise SuiteError(f"{where}: image {value!r} {error}") from None
