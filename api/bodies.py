"""Reading request bodies and query strings into plain values, with 400s that say why."""

from __future__ import annotations

import csv
import io
import json

from flask import request

from gridagg.errors import InvalidInput

from .problems import ApiProblem

JSON_TYPES = ("application/json",)
CSV_TYPES = ("text/csv", "application/csv")


def _bad_type(expected: str) -> ApiProblem:
    got = request.mimetype or "none"
    return ApiProblem(400, "Unsupported content type",
                      f"the body must be {expected} (Content-Type was {got})",
                      field="Content-Type", slug="unsupported-content-type")


def is_json() -> bool:
    mt = request.mimetype or ""
    return mt in JSON_TYPES or mt.endswith("+json")


def json_body() -> object:
    """The parsed JSON body (any JSON value); 400 for a missing, mistyped or broken one."""
    if not is_json():
        raise _bad_type("JSON (Content-Type: application/json)")
    raw = request.get_data(cache=True)
    if not raw.strip():
        raise ApiProblem(400, "Malformed JSON", "the request body is empty", field="body",
                         slug="malformed-json")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ApiProblem(400, "Malformed JSON", f"the request body is not valid JSON: {exc}",
                         field="body", slug="malformed-json") from None


def json_object() -> dict:
    body = json_body()
    if not isinstance(body, dict):
        raise InvalidInput("the request body must be a JSON object", field="body")
    return body


def csv_rows() -> tuple[list[dict | None], list[tuple[int, str | None, str]]]:
    """Rows of a CSV body with a header line. Returns (rows, rejected): a row that cannot
    be read as header-shaped is None in rows and listed in rejected."""
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
        rows: list[dict | None] = []
        rejected: list[tuple[int, str | None, str]] = []
        for values in reader:
            if not values:  # blank line
                continue
            i = len(rows)
            if len(values) != len(header):
                rows.append(None)
                rejected.append((i, "row", f"has {len(values)} values, the header names {len(header)}"))
                continue
            rows.append({h: (v.strip() if v.strip() != "" else None) for h, v in zip(header, values)})
        return rows, rejected
    except csv.Error as exc:
        raise InvalidInput(f"the CSV body is malformed: {exc}", field="body") from None


def rows_body() -> tuple[list[dict | None], list[tuple[int, str | None, str]]]:
    mt = request.mimetype or ""
    if mt in CSV_TYPES:
        return csv_rows()
    if not is_json():
        raise _bad_type("a JSON list of rows (application/json) or CSV with a header (text/csv)")
    body = json_body()
    if isinstance(body, dict) and "rows" in body:
        body = body["rows"]
    if not isinstance(body, list):
        raise InvalidInput("the body must be a JSON list of row objects (or {\"rows\": [...]})", field="body")
    return body, []


def query_args() -> dict:
    """The GET form of a query: ?aggregates=a,b&where.dim=lo,hi&region=<GeoJSON>.
    An empty side of lo,hi is unbounded."""
    args = request.args
    out: dict = {"where": {}}
    for key in args:
        values = args.getlist(key)
        if len(values) > 1:
            raise InvalidInput(f"query parameter {key!r} is given {len(values)} times", field=key)
        value = values[0]
        if key == "aggregates":
            out["aggregates"] = [a.strip() for a in value.split(",") if a.strip()]
        elif key.startswith("where."):
            parts = value.split(",")
            if len(parts) != 2:
                raise InvalidInput(f"{key} must be 'lo,hi' (either may be empty)", field=key)
            out["where"][key[len("where."):]] = [p.strip() or None for p in parts]
        elif key == "region":
            try:
                out["region"] = json.loads(value)
            except (ValueError, RecursionError):
                raise InvalidInput("region must be GeoJSON text", field="region") from None
        else:
            raise InvalidInput(f"unknown query parameter {key!r}: use aggregates, where.<dimension>, region",
                               field=key)
    if "aggregates" not in out:
        raise InvalidInput("the aggregates parameter is required, e.g. ?aggregates=count", field="aggregates")
    return out
