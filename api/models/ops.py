"""Errors and health: the problem details every error is (RFC 9457) and /healthz."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Answer


class Problem(Answer):
    """An error, as problem details (RFC 9457)."""

    type: str = Field(description="urn:gridagg:problem:<slug>, such as urn:gridagg:problem:invalid-input")
    title: str
    status: int
    detail: str = Field(description="one sentence saying what is wrong and what is expected")
    field: str | None = Field(description="the offending field, such as where.lon or aggregates[0] (dotted "
                                          "keys, [i] for list positions), a header or 'body'; null when none")


class Health(Answer):
    """Everything the API needs is reachable."""

    status: Literal["ok"]
    checks: dict[str, str] = Field(description="postgresql and store: 'ok'; store_kind: embedded or hbase")


class Unhealthy(Answer):
    """A store is unreachable ("unavailable"), or the worker is still warming up: compiling
    or loading its query kernels ("warming")."""

    status: Literal["unavailable", "warming"]
    checks: dict[str, str] = Field(description="postgresql and store: 'ok', 'unreachable' or 'unknown'; "
                                               "store_kind: embedded or hbase")
    detail: str
