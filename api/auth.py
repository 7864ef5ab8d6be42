"""Bearer tokens: writes need settings.write_token; reads need settings.read_token when
one is configured (otherwise reads are open)."""

from __future__ import annotations

import hmac
from functools import wraps

from flask import request

from .problems import ApiProblem
from .state import config


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


def write_required(view):
    @wraps(view)
    def wrapper(*args, **kwargs):
        token = config().write_token
        if not token:
            raise ApiProblem(403, "Forbidden", "writes are disabled: no write token is configured; "
                             "set GRIDAGG_WRITE_TOKEN on the server to enable them", field="Authorization")
        _check(token, "writes")
        return view(*args, **kwargs)

    return wrapper


def read_required(view):
    @wraps(view)
    def wrapper(*args, **kwargs):
        token = config().read_token
        if token:
            # The write token grants reads too.
            _check(token, "reads", also=config().write_token)
        return view(*args, **kwargs)

    return wrapper
