"""Errors a caller can act on. Each names the offending field where there is one."""

from __future__ import annotations


class GridaggError(Exception):
    """Base of every error gridagg raises on purpose."""

    title = "gridagg error"

    def __init__(self, detail: str, field: str | None = None):
        super().__init__(detail)
        self.detail = detail
        self.field = field


class InvalidInput(GridaggError):
    """The request, row or definition is malformed; nothing was written."""

    title = "Invalid input"


class UnknownDataset(GridaggError):
    title = "Unknown dataset"

    def __init__(self, name: str):
        super().__init__(f"no dataset named {name!r}", field="dataset")
        self.name = name


class DatasetExists(GridaggError):
    title = "Dataset exists"

    def __init__(self, name: str):
        super().__init__(f"a dataset named {name!r} already exists", field="name")


class StoreUnavailable(GridaggError):
    """PostgreSQL or the cell store cannot be reached; retry later."""

    title = "Store unavailable"


class WorkLimitExceeded(GridaggError):
    """A query is beyond a configured limit (rows to scan, grids, a series' points, a
    region's vertices, its running time); the detail names the limit."""

    title = "Work limit exceeded"
