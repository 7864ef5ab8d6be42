"""SqlError: what a statement gets instead of an answer, with the SQLSTATE PostgreSQL
would send (https://www.postgresql.org/docs/current/errcodes-appendix.html), so that a
client's error handling reads it as it would a real server's."""

from __future__ import annotations

from gridagg.model.errors import (
    GridaggError,
    StoreUnavailable,
    UnknownDataset,
    WorkLimitExceeded,
)

SYNTAX_ERROR = "42601"
UNDEFINED_TABLE = "42P01"
UNDEFINED_COLUMN = "42703"
UNDEFINED_FUNCTION = "42883"
DATATYPE_MISMATCH = "42804"
FEATURE_NOT_SUPPORTED = "0A000"
INVALID_PARAMETER_VALUE = "22023"
INVALID_DATETIME_FORMAT = "22007"
PROGRAM_LIMIT_EXCEEDED = "54000"
CANNOT_CONNECT_NOW = "57P03"
UNDEFINED_OBJECT = "42704"
PROTOCOL_VIOLATION = "08P01"
INTERNAL_ERROR = "XX000"


class SqlError(Exception):
    """A statement refused: sqlstate (five characters) and a message naming the problem."""

    def __init__(self, sqlstate: str, message: str):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message


def unsupported(construct: str, hint: str = "") -> SqlError:
    """0A000 naming the construct: gridagg answers aggregates, never a partial answer."""
    return SqlError(FEATURE_NOT_SUPPORTED, f"{construct} is not supported by gridagg's SQL endpoint"
                    + (f": {hint}" if hint else ""))


def from_engine(exc: GridaggError) -> SqlError:
    """The SqlError for an error the engine raised (as the HTTP API maps them to 4xx/503)."""
    if isinstance(exc, UnknownDataset):
        return SqlError(UNDEFINED_TABLE, f'relation "{exc.name}" does not exist')
    if isinstance(exc, WorkLimitExceeded):
        return SqlError(PROGRAM_LIMIT_EXCEEDED, exc.detail)
    if isinstance(exc, StoreUnavailable):
        return SqlError(CANNOT_CONNECT_NOW, f"{exc.detail}; retry later")
    return SqlError(INVALID_PARAMETER_VALUE, exc.detail)
