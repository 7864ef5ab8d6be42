"""Reading a request into its model: the content type, a JSON body, a CSV body of rows,
a query string. What the values must be is the models' business (api.models); this
module only gets the text to them, with a 400 naming the problem when it cannot.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from flask import request
from pydantic import BaseModel

from gridagg.model.errors import InvalidInput

from .problems import ApiProblem
from .validation import parse_data, parse_json

JSON_TYPE = "application/json"
CSV_TYPES = ("text/csv", "application/csv")


def is_json() -> bool:
    mt = request.mimetype or ""
    return mt == JSON_TYPE or mt.endswith("+json")


def is_csv() -> bool:
    return (request.mimetype or "") in CSV_TYPES


def unsupported_type(expected: str) -> ApiProblem:
    got = request.mimetype or "none"
    return ApiProblem(400, "Unsupported content type", f"the body must be {expected} (Content-Type was {got})",
                      field="Content-Type", slug="unsupported-content-type")


def json_body(model: type[BaseModel]) -> BaseModel:
    """The JSON body as `model`; 400 for another content type, an empty or broken body,
    or a field the model refuses."""
    if not is_json():
        raise unsupported_type(f"JSON (Content-Type: {JSON_TYPE})")
    raw = request.get_data(cache=True)
    if not raw or raw.isspace():
        raise ApiProblem(400, "Malformed JSON", "the request body is empty", field="body", slug="malformed-json")
    return parse_json(model, raw)


def query_string(model: type[BaseModel]) -> BaseModel:
    """The query string as `model`. A parameter named field.key (where.lon=1,2) is the
    key of the model's object field `field`; each parameter may be given once."""
    data: dict = {}
    nested: dict[str, dict] = {}
    for key in request.args:
        values = request.args.getlist(key)
        if len(values) > 1:
            raise InvalidInput(f"query parameter {key!r} is given {len(values)} times; give it once", field=key)
        head, dot, tail = key.partition(".")
        if dot:
            nested.setdefault(head, {})[tail] = values[0]
        else:
            data[key] = values[0]
    for head, values in nested.items():
        if head in data:
            raise InvalidInput(f"query parameter {head!r} is given both alone and as {head}.<key>", field=head)
        data[head] = values
    return parse_data(model, data)


@dataclass
class CsvRows:
    """Rows of a CSV body: one dict per data line (empty values None), or None for a
    line that cannot be read as the header's columns, listed in rejected as
    (index, field, reason)."""

    rows: list[dict | None]
    rejected: list[tuple[int, str | None, str]] = field(default_factory=list)


def csv_rows() -> CsvRows:
    """The CSV body, with a header line naming the columns."""
    raw = request.get_data(cache=True)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the CSV body is not UTF-8: {exc}", field="body") from None
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, None)
        if header is None or not any(h.strip() for h in header):
            raise InvalidInput("the CSV body needs a header line naming the columns", field="body")
        header = [h.strip() for h in header]
        dupes = sorted({h for h in header if header.count(h) > 1})
        if dupes or "" in header:
            raise InvalidInput(f"the CSV header has empty or repeated names {dupes}", field="body")
        out = CsvRows([])
        for values in reader:
            if not values:  # blank line
                continue
            if len(values) != len(header):
                out.rejected.append((len(out.rows), "row",
                                     f"has {len(values)} values, the header names {len(header)}"))
                out.rows.append(None)
                continue
            out.rows.append({h: (v.strip() if v.strip() != "" else None) for h, v in zip(header, values)})
        return out
    except csv.Error as exc:
        raise InvalidInput(f"the CSV body is malformed: {exc}", field="body") from None
