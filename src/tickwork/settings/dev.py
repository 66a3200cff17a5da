"""``tickwork dev``'s settings: where its embedded PostgreSQL lives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tickwork.settings.fields import not_blank, port, setting, validate


@dataclass(frozen=True)
class DevSettings:
    ENV_PREFIX: ClassVar[str] = "TICKWORK_DEV_"

    data_dir: str = setting(
        "where PostgreSQL keeps its data",
        group="dev",
        default=".tickwork",
        metavar="DIR",
        checks=[not_blank],
    )
    port: int | None = setting(
        "PostgreSQL port on 127.0.0.1",
        group="dev",
        default=None,
        default_doc="the last one used, or a free one",
        metavar="N",
        checks=[port],
    )
    db_only: bool = setting(
        "only start PostgreSQL (migrated) and print its URL for TICKWORK_DATABASE_URL; no "
        "worker, no examples; Ctrl-C stops it",
        group="dev",
        default=False,
    )

    def __post_init__(self) -> None:
        validate(self)
