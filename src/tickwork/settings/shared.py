"""Settings every command shares: the database URL (of the commands that take one) and
logging (of the long-running ones)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tickwork.settings.fields import setting, validate

LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class DatabaseSettings:
    ENV_PREFIX: ClassVar[str] = "TICKWORK_"

    database_url: str = setting(
        "libpq connection string of the PostgreSQL database; given before or after the "
        "command's name",
        group="database",
        default="",
        default_doc="none (required)",
        metavar="URL",
        required=True,
    )


@dataclass(frozen=True)
class LogSettings:
    ENV_PREFIX: ClassVar[str] = "TICKWORK_"

    log_format: str = setting(
        "text (key=value) or json, one record per line on stderr",
        group="logging",
        default="text",
        metavar="text|json",
        choices=LOG_FORMATS,
    )
    log_level: str = setting(
        "the least severe records logged",
        group="logging",
        default="info",
        metavar="|".join(LOG_LEVELS),
        choices=LOG_LEVELS,
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_level", self.log_level.lower())
        validate(self)


@dataclass(frozen=True)
class QuietLogSettings(LogSettings):
    """``tickwork dev``'s: it prints its own view of what happens, so only warnings are
    logged."""

    log_level: str = setting(
        "the least severe records logged",
        group="logging",
        default="warning",
        metavar="|".join(LOG_LEVELS),
        choices=LOG_LEVELS,
    )
