"""HTTP-side configuration, derived from gridagg.config.Settings in one place.

Settings (GRIDAGG_* environment variables) hold the servers and the tokens. The few
knobs that only the HTTP layer needs are read here, from the environment:

GRIDAGG_MAX_BODY_BYTES   largest accepted request body (default 16 MiB); larger -> 413
GRIDAGG_MAX_SCAN_ROWS    most raw rows one request may scan (default 5,000,000);
                         more -> 422 with a message to narrow the query
GRIDAGG_MAX_POINTS       most points one series request may return (default 10,000)
GRIDAGG_MAX_GRIDS        most leaves one request may touch or list (default 200,000)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gridagg.config import Settings
from gridagg.errors import InvalidInput

DEFAULTS = {
    "max_body_bytes": 16 * 1024 * 1024,
    "max_scan_rows": 5_000_000,
    "max_points": 10_000,
    "max_grids": 200_000,
}


@dataclass(frozen=True)
class ApiConfig:
    settings: Settings
    max_body_bytes: int
    max_scan_rows: int | None
    max_points: int
    max_grids: int

    @property
    def write_token(self) -> str | None:
        return self.settings.write_token

    @property
    def read_token(self) -> str | None:
        return self.settings.read_token

    @classmethod
    def from_settings(cls, settings: Settings, env: dict | None = None, **overrides) -> "ApiConfig":
        env = os.environ if env is None else env
        values = {}
        for key, default in DEFAULTS.items():
            if key in overrides:
                values[key] = overrides[key]
                continue
            raw = env.get(f"GRIDAGG_{key.upper()}")
            if not raw:
                values[key] = default
                continue
            try:
                values[key] = int(raw)
            except ValueError:
                raise InvalidInput(f"GRIDAGG_{key.upper()} must be an integer, not {raw!r}",
                                   field=key) from None
        unknown = set(overrides) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown API settings {sorted(unknown)}")
        return cls(settings=settings, **values)
