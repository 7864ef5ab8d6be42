"""What the HTTP layer needs of the Settings (gridagg.config declares them all): the
servers and tokens, and the limits of one request.

max_body_bytes  largest accepted request body; larger -> 413
max_query_ms    most milliseconds of work one question may cost, as the store's cost model
                predicts it; more -> 422 with the estimate
max_points      most points one series request may return, and steps its window may span
max_grids       most leaves one request may list
max_vertices    most vertices of one request's polygon region
Beyond a limit a request gets 422 naming it (gridagg.model.errors.WorkLimitExceeded).
"""

from __future__ import annotations

from dataclasses import dataclass

from gridagg.config import Settings

LIMITS = ("max_body_bytes", "max_query_ms", "max_points", "max_grids", "max_vertices")


@dataclass(frozen=True)
class ApiConfig:
    settings: Settings
    max_body_bytes: int
    max_query_ms: float | None
    max_points: int
    max_grids: int
    max_vertices: int

    @property
    def write_token(self) -> str | None:
        return self.settings.write_token

    @property
    def read_token(self) -> str | None:
        return self.settings.read_token

    @classmethod
    def from_settings(cls, settings: Settings, **overrides) -> "ApiConfig":
        """The limits come from `settings`, unless given in `overrides` (one of LIMITS
        each; max_query_ms=None lifts that cap)."""
        unknown = set(overrides) - set(LIMITS)
        if unknown:
            raise TypeError(f"unknown API settings {sorted(unknown)}")
        values = {name: overrides.get(name, getattr(settings, name)) for name in LIMITS}
        return cls(settings=settings, **values)
