import os
from collections.abc import Mapping
from dataclasses import dataclass

from .env import env_flag, env_int


@dataclass(frozen=True)
class Settings:
    debug: bool = False
    port: int = 8000
    reload: bool = True


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    return Settings(
        debug=env_flag(env, "APP_DEBUG", False),
        port=env_int(env, "APP_PORT", 8000),
        reload=env_flag(env, "APP_RELOAD", True),
    )
