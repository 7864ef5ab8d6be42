"""The OpenAPI 3 document of the API, written to match the blueprints."""

from __future__ import annotations

from gridagg import __version__

_PROBLEM = {"$ref": "#/components/schemas/Problem"}


def _problem(desc: str) -> dict:
    return {"description": desc, "content": {"application/problem+json": {"schema": _PROBLEM}}}


def _json(schema: dict, desc: str) -> dict:
    return {"description": desc, "content": {"application/json": {"schema": schema}}}


_NAME = {"name": "name", "in": "path", "required": True, "description": "dataset name",
         "schema": {"type": "string"}}

_READ_ERRORS = {
    "400": _problem("malformed input: the offending field is named"),
    "401": _problem("a read token is configured and the bearer token is missing or wrong"),
    "404": _problem("no such dataset"),
    "413": _problem("body larger than the configured limit"),
    "422": _problem("the request would scan more rows than the configured limit"),
    "503": _problem("PostgreSQL or HBase is unreachable; retry after Retry-After seconds"),
}
_WRITE_ERRORS = {
    "400": _READ_ERRORS["400"],
    "401": _problem("missing or invalid bearer token"),
    "403": _problem("writes are disabled: no write token is configured (GRIDAGG_WRITE_TOKEN)"),
    "413": _READ_ERRORS["413"],
    "503": _READ_ERRORS["503"],
}

_VALUE = {"nullable": True, "oneOf": [{"type": "number"}, {"type": "string"}]}

SCHEMAS = {
    "Problem": {
        "type": "object",
        "required": ["type", "title", "status", "detail"],
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "field": {"type": "string", "nullable": True},
        },
    },
    "Column": {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,47}$"},
            "type": {"type": "string", "enum": ["number", "time"]},
            "scale": {"type": "integer", "minimum": 0, "maximum": 12},
            "min": {"oneOf": [{"type": "number"}, {"type": "string"}]},
            "max": {"oneOf": [{"type": "number"}, {"type": "string"}]},
            "unit": {"type": "string"},
            "rounding": {"type": "string", "enum": ["refuse", "half_even", "half_up", "floor", "ceil"],
                         "description": "number columns: how a value with more decimals than the scale "
                                        "is stored (default refuse: it is an error)"},
            "nullable": {"type": "boolean",
                         "description": "measures only: a missing value is stored as absent"},
        },
    },
    "DatasetDefinition": {
        "type": "object",
        "required": ["name", "dimensions"],
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,47}$"},
            "dimensions": {"type": "array", "items": {"$ref": "#/components/schemas/Column"}},
            "measures": {"type": "array", "items": {"$ref": "#/components/schemas/Column"}},
            "grid": {
                "type": "object",
                "properties": {
                    "n_size": {"type": "integer", "minimum": 1},
                    "n_threshold": {"type": "integer", "minimum": 1},
                    "l_time": {"oneOf": [{"type": "integer"}, {"type": "string"}], "nullable": True},
                },
            },
        },
    },
    "Dataset": {
        "type": "object",
        "required": ["name", "dimensions", "measures", "grid"],
        "properties": {
            "name": {"type": "string"},
            "dimensions": {"type": "array", "items": {"type": "object"}},
            "measures": {"type": "array", "items": {"type": "object"}},
            "grid": {"type": "object"},
            "time_dimension": {"type": "string", "nullable": True},
            "region_dimensions": {"type": "array", "items": {"type": "string"}, "nullable": True},
            "row_count": {"type": "integer"},
            "grid_count": {"type": "integer"},
        },
    },
    "Where": {
        "type": "object",
        "description": "dimension -> [lo, hi] in user units (numbers, ISO 8601 timestamps); "
                       "null for an unbounded end; dimensions left out span their whole domain",
        "additionalProperties": {"type": "array", "minItems": 2, "maxItems": 2, "items": _VALUE},
    },
    "Region": {
        "type": "object",
        "description": "a GeoJSON Polygon or MultiPolygon (or a Feature holding one) over the "
                       "dataset's lon/lat dimensions; boundary points count as inside",
        "required": ["type"],
        "properties": {"type": {"type": "string", "enum": ["Polygon", "MultiPolygon", "Feature"]},
                       "coordinates": {"type": "array"}, "geometry": {"type": "object"}},
    },
    "Aggregates": {
        "type": "array", "minItems": 1,
        "items": {"type": "string", "description": "count, sum:<col>, min:<col>, max:<col> or avg:<col>"},
    },
    "QueryRequest": {
        "type": "object",
        "required": ["aggregates"],
        "additionalProperties": False,
        "properties": {
            "where": {"$ref": "#/components/schemas/Where"},
            "aggregates": {"$ref": "#/components/schemas/Aggregates"},
            "region": {"allOf": [{"$ref": "#/components/schemas/Region"}], "nullable": True},
        },
    },
    "Plan": {
        "type": "object",
        "description": "the grid engine's statistics (the paper's Table 3) and round trips",
        "properties": {
            "total_grids": {"type": "integer"},
            "reused_grids_before": {"type": "integer"},
            "reused_grids_after": {"type": "integer"},
            "rows_in_reused_grids": {"type": "integer"},
            "scanned_grids_before": {"type": "integer"},
            "scanned_grids_after": {"type": "integer"},
            "rows_in_scanned_grids": {"type": "integer"},
            "rows_matched_by_scans": {"type": "integer"},
            "round_trips": {"type": "object", "additionalProperties": {"type": "integer"}},
            "elapsed_ms": {"type": "number"},
            "skip_rate": {"type": "number", "nullable": True},
            "reuse_rate": {"type": "number", "nullable": True},
            "region": {"type": "object"},
            "buckets": {"type": "integer"},
        },
    },
    "QueryResponse": {
        "type": "object",
        "required": ["results", "count", "plan"],
        "properties": {
            "results": {"type": "object", "additionalProperties": _VALUE},
            "count": {"type": "integer", "nullable": True},
            "plan": {"$ref": "#/components/schemas/Plan"},
        },
    },
    "SeriesRequest": {
        "type": "object",
        "required": ["aggregates", "step"],
        "additionalProperties": False,
        "properties": {
            "where": {"$ref": "#/components/schemas/Where"},
            "aggregates": {"$ref": "#/components/schemas/Aggregates"},
            "region": {"allOf": [{"$ref": "#/components/schemas/Region"}], "nullable": True},
            "step": {"oneOf": [{"type": "integer", "minimum": 1}, {"type": "string"}],
                     "description": "bucket width: seconds or text like '1d', '6h'"},
            "window": {"oneOf": [{"type": "integer", "minimum": 1}, {"type": "string"}], "nullable": True,
                       "description": "moving window ending with each bucket, a whole number of steps "
                                      "(default: step, i.e. plain buckets)"},
            "start": {"type": "string", "nullable": True, "description": "first point (default: the "
                      "time range of where, else the domain start)"},
            "end": {"type": "string", "nullable": True, "description": "the last point is the bucket "
                    "holding end"},
        },
    },
    "SeriesResponse": {
        "type": "object",
        "required": ["step", "window", "points", "plan"],
        "properties": {
            "step": {"type": "integer"},
            "window": {"type": "integer"},
            "points": {"type": "array", "items": {
                "type": "object",
                "required": ["time", "window", "count", "results"],
                "properties": {
                    "time": {"type": "string"},
                    "window": {"type": "array", "items": {"type": "string"}},
                    "count": {"type": "integer"},
                    "results": {"type": "object", "additionalProperties": _VALUE},
                },
            }},
            "plan": {"$ref": "#/components/schemas/Plan"},
        },
    },
    "IngestResponse": {
        "type": "object",
        "required": ["received", "stored", "duplicates", "rejected"],
        "properties": {
            "received": {"type": "integer"},
            "stored": {"type": "integer"},
            "duplicates": {"type": "integer"},
            "splits": {"type": "integer"},
            "rounded": {"type": "object", "additionalProperties": {"type": "integer"},
                        "description": "values rounded per column with a rounding policy"},
            "rejected": {"type": "array", "items": {
                "type": "object",
                "required": ["index", "reason"],
                "properties": {"index": {"type": "integer"}, "field": {"type": "string", "nullable": True},
                               "reason": {"type": "string"}},
            }},
        },
    },
}


# The page at / and what it needs beyond the query endpoints (api/blueprints/page.py,
# api/blueprints/leaves.py): kept together so they move as one.
PAGE_SCHEMAS = {
    "LeavesRequest": {
        "type": "object",
        "required": ["axes"],
        "additionalProperties": False,
        "properties": {
            "axes": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "string"},
                     "description": "the two dimensions to project onto, e.g. [\"longitude\", \"latitude\"]"},
            "where": {"$ref": "#/components/schemas/Where"},
        },
    },
    "LeavesResponse": {
        "type": "object",
        "required": ["dataset", "axes", "total_grids", "grid_count", "rows", "grids"],
        "properties": {
            "dataset": {"type": "string"},
            "axes": {"type": "array", "items": {"type": "string"}},
            "total_grids": {"type": "integer", "description": "leaves of the dataset"},
            "grid_count": {"type": "integer", "description": "leaves touching the box of where"},
            "rows": {"type": "integer", "description": "rows in those leaves"},
            "grids": {"type": "array", "items": {
                "type": "object",
                "required": ["id", "count", "box", "data"],
                "properties": {
                    "id": {"type": "string"},
                    "count": {"type": "integer", "description": "the leaf's rows (all of them: "
                              "where only picks the leaves)"},
                    "box": {"type": "array", "description": "[[x_lo, x_hi], [y_lo, y_hi]]: the leaf's "
                            "box on the axes, in user units", "items": {"type": "array", "items": _VALUE}},
                    "data": {"type": "array", "nullable": True, "description": "[[x_min, x_max], "
                             "[y_min, y_max]] of the leaf's rows on the axes (its stored minimum and "
                             "maximum); null for an empty leaf", "items": {"type": "array", "items": _VALUE}},
                },
            }},
        },
    },
}

PAGE_PATHS = {
    "/": {"get": {
        "summary": "the dashboard page (HTML): map, selection, answers, series, plan and grid",
        "description": "Served with its bundle from the installed package; it uses only this API.",
        "responses": {"200": {"description": "the page", "content": {"text/html": {"schema": {"type": "string"}}}},
                      "503": _problem("the page's bundle is not built (bash api/page/build.sh)")},
    }},
    "/page/{name}": {"get": {
        "summary": "a file of the page's bundle (script, style sheet, outlines), named by the page",
        "parameters": [{"name": "name", "in": "path", "required": True, "description": "file name",
                        "schema": {"type": "string"}}],
        "responses": {"200": {"description": "the file", "content": {"*/*": {"schema": {"type": "string"}}}},
                      "404": _problem("no such file"),
                      "503": _problem("the page's bundle is not built (bash api/page/build.sh)")},
    }},
    "/v1/datasets/{name}/leaves": {"post": {
        "summary": "leaves touching a box, projected onto two dimensions: the grid and the data's density",
        "description": "Every leaf that touches the box of where, with its box on the two axes, its "
                       "row count and the extent of its rows there (from its stored aggregate; no "
                       "row is read). At most GRIDAGG_MAX_GRIDS leaves per answer (422 beyond).",
        "parameters": [_NAME],
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/LeavesRequest"}}}},
        "responses": {"200": _json({"$ref": "#/components/schemas/LeavesResponse"}, "the leaves"),
                      **{k: _READ_ERRORS[k] for k in ("400", "401", "404", "413", "503")},
                      "422": _problem("more leaves touch the box than the configured limit")},
    }},
}


def document() -> dict:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "gridagg",
            "version": __version__,
            "description": "Exact range aggregates over sensor archives: boxes, polygon regions and "
                           "time series over a k-d grid of partial aggregates. Writes need "
                           "'Authorization: Bearer <GRIDAGG_WRITE_TOKEN>'; reads are open unless "
                           "GRIDAGG_READ_TOKEN is set. Errors are problem details.",
        },
        "components": {
            "schemas": {**SCHEMAS, **PAGE_SCHEMAS},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": {
            "/healthz": {"get": {
                "summary": "PostgreSQL and the cell store are reachable",
                "responses": {
                    "200": _json({"type": "object"}, "everything reachable"),
                    "503": _json({"type": "object"}, "a store is unreachable"),
                },
            }},
            "/metrics": {"get": {
                "summary": "Prometheus metrics (text format)",
                "responses": {"200": {"description": "metrics",
                                      "content": {"text/plain": {"schema": {"type": "string"}}}}},
            }},
            "/openapi.json": {"get": {
                "summary": "this document",
                "responses": {"200": _json({"type": "object"}, "OpenAPI 3 document")},
            }},
            "/v1/datasets": {
                "get": {
                    "summary": "list datasets",
                    "responses": {
                        "200": _json({"type": "object", "required": ["datasets"], "properties": {
                            "datasets": {"type": "array", "items": {"$ref": "#/components/schemas/Dataset"}}}},
                            "all datasets"),
                        "401": _READ_ERRORS["401"], "503": _READ_ERRORS["503"],
                    },
                },
                "post": {
                    "summary": "create a dataset",
                    "security": [{"bearer": []}],
                    "requestBody": {"required": True, "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/DatasetDefinition"}}}},
                    "responses": {
                        "201": _json({"$ref": "#/components/schemas/Dataset"}, "created"),
                        "409": _problem("a dataset of that name exists"),
                        **_WRITE_ERRORS,
                    },
                },
            },
            "/v1/datasets/{name}": {"get": {
                "summary": "a dataset's schema, row count, grid count and grid parameters",
                "parameters": [_NAME],
                "responses": {"200": _json({"$ref": "#/components/schemas/Dataset"}, "the dataset"),
                              **{k: _READ_ERRORS[k] for k in ("401", "404", "503")}},
            }},
            "/v1/datasets/{name}/grids": {"get": {
                "summary": "leaf grids: boxes in user units with row counts",
                "parameters": [_NAME],
                "responses": {
                    "200": _json({"type": "object", "required": ["grids"], "properties": {
                        "dataset": {"type": "string"}, "grid_count": {"type": "integer"},
                        "grids": {"type": "array", "items": {"type": "object", "properties": {
                            "id": {"type": "string"}, "count": {"type": "integer"},
                            "box": {"type": "object"}}}}}}, "the leaves"),
                    **{k: _READ_ERRORS[k] for k in ("401", "404", "422", "503")},
                },
            }},
            "/v1/datasets/{name}/rows": {"post": {
                "summary": "insert rows (Algorithm 1): a JSON list of row objects or CSV with a header",
                "description": "Each row names every column but nullable ones (and optionally an "
                               "element 'id'; rows with a stored id are duplicates and not written "
                               "again). A nullable column's value may be absent, null or empty. Invalid rows "
                               "are rejected one by one (index counts data rows from 0) and the "
                               "others stored.",
                "security": [{"bearer": []}],
                "parameters": [_NAME],
                "requestBody": {"required": True, "content": {
                    "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
                    "text/csv": {"schema": {"type": "string"}},
                }},
                "responses": {"200": _json({"$ref": "#/components/schemas/IngestResponse"}, "what was stored"),
                              "404": _READ_ERRORS["404"], **_WRITE_ERRORS},
            }},
            "/v1/datasets/{name}/query": {
                "post": {
                    "summary": "aggregates over a box and optional polygon region",
                    "parameters": [_NAME],
                    "requestBody": {"required": True, "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/QueryRequest"}}}},
                    "responses": {"200": _json({"$ref": "#/components/schemas/QueryResponse"}, "the answer"),
                                  **_READ_ERRORS},
                },
                "get": {
                    "summary": "the same query as query parameters",
                    "description": "?aggregates=min:wind_speed,count&where.temperature=15,35 "
                                   "(where.<dimension>=lo,hi; an empty side is unbounded) and "
                                   "optionally region=<GeoJSON text>.",
                    "parameters": [
                        _NAME,
                        {"name": "aggregates", "in": "query", "required": True,
                         "schema": {"type": "string"}, "description": "comma-separated aggregates"},
                        {"name": "region", "in": "query", "required": False,
                         "schema": {"type": "string"}, "description": "GeoJSON Polygon text"},
                    ],
                    "responses": {"200": _json({"$ref": "#/components/schemas/QueryResponse"}, "the answer"),
                                  **_READ_ERRORS},
                },
            },
            "/v1/datasets/{name}/series": {"post": {
                "summary": "bucketed or moving-window aggregates over the time dimension",
                "description": "Point i stands for the bucket [start + i*step, start + (i+1)*step) "
                               "and aggregates the window of `window` seconds ending with it. "
                               "Buckets are aggregated once and combined across windows.",
                "parameters": [_NAME],
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/SeriesRequest"}}}},
                "responses": {"200": _json({"$ref": "#/components/schemas/SeriesResponse"}, "the series"),
                              **_READ_ERRORS},
            }},
            **PAGE_PATHS,
        },
    }
