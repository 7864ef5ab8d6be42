"""Bearer tokens: writes need settings.write_token; reads need settings.read_token when
one is configured (otherwise reads are open). Each endpoint declares its access
(api.contract.operation), which calls authorize before reading the request."""

from __future__ import annotations

import hmac

from flask import request

from .problems import ApiProblem
from .state import config

ACCESS = ("open", "read", "write")


def _bearer() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _check(expected: str, what: str, also: str | None = None) -> None:
    given = _bearer()
    if given is None:
        raise ApiProblem(401, "Unauthorized", f"{what} need an 'Authorization: Bearer <token>' header",
                         field="Authorization", headers={"WWW-Authenticate": 'Bearer realm="gridagg"'})
    ok = hmac.compare_digest(given.encode(), expected.encode())
    if also:
        ok = hmac.compare_digest(given.encode(), also.encode()) or ok
    if not ok:
        raise ApiProblem(401, "Unauthorized", "the bearer token is not valid", field="Authorization",
                         headers={"WWW-Authenticate": 'Bearer realm="gridagg", error="invalid_token"'})


def authorize(access: str) -> None:
    """Raises ApiProblem (401, 403) unless the request may do what `access` names:
    "open" (anyone), "read" (the read token, or the write token, when a read token is
    configured; else anyone) or "write" (the write token, which must be configured)."""
    if access == "read":
        token = config().read_token
        if token:
            _check(token, "reads", also=config().write_token)
    elif access == "write":
        token = config().write_token
        if not token:
            raise ApiProblem(403, "Forbidden", "writes are disabled: no write token is configured; "
                             "set GRIDAGG_WRITE_TOKEN on the server to enable them", field="Authorization")
        _check(token, "writes")
