"""``tickwork sync``'s settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tickwork.settings.fields import not_blank, setting, validate


@dataclass(frozen=True)
class SyncSettings:
    ENV_PREFIX: ClassVar[str] = "TICKWORK_SYNC_"

    owner: str = setting(
        "who deploys the namespace: it keeps this owner, and another owner's sync is refused "
        "unless --take-over",
        group="sync",
        default="tickwork-sync",
        metavar="OWNER",
        checks=[not_blank],
    )

    def __post_init__(self) -> None:
        validate(self)
