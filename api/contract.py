"""Each endpoint's contract, declared once, next to its view: who may call it, what it
takes (a JSON body model, CSV rows, a query string model), what it answers (a model or
a media type per status) and which problems it may answer. `operation` enforces the
contract on every request (access first, then the request read into its model, handed
to the view as `body` or `query`), and api.openapi writes /openapi.json from the same
declarations, so the document cannot drift from what the endpoints do.

Why plain pydantic and a small generator, rather than flask-openapi3, spectree or
apispec: pydantic v2 already does both halves of the work. `model_validate_json` parses
and checks a body in one pass (in less time than `json.loads` alone
takes) and `models_json_schema` writes the schemas. A library would add the glue, and
the glue is where this API differs from their defaults. Errors must be problem details
whose detail is one sentence naming the field (api.validation). A malformed body must
be reported as malformed: flask-openapi3 (in the version read) takes the body with
`request.get_json(silent=True) or {}`, so broken JSON or a wrong content type turns into
"field required". The GET form of /query has pattern-named parameters
(where.<dimension>=lo,hi) and /rows takes CSV as well as JSON, which neither library
models. And both bring routes, an application or blueprint class, or documentation
pages of their own. apispec only writes documents (no validation) and reads pydantic
models only through a plugin. What is left to write is small: this decorator and a walk
over Flask's url_map (api.openapi), which refuses a route that declares no contract.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import wraps

from pydantic import BaseModel

from .auth import ACCESS, authorize
from .reading import (
    JSON_TYPE,
    csv_rows,
    is_csv,
    is_json,
    json_body,
    query_string,
    unsupported_type,
)


@dataclass(frozen=True)
class Media:
    """An answer that is not a model: its content type, what it is, and its JSON schema."""

    type: str
    description: str
    schema: Mapping = field(default_factory=lambda: {"type": "string"})


@dataclass(frozen=True)
class Operation:
    """One endpoint's contract.

    summary, description: what it does, for people.
    access: "open", "read" or "write" (api.auth.authorize).
    body: the JSON body's model (the view gets it as `body`).
    csv: when the body may instead be CSV with a header line (text/csv): what the CSV
        holds; the view then gets api.reading.CsvRows.
    query: the query string's model (the view gets it as `query`).
    answers: status -> the answer's model, or a Media.
    stream: an alternative form of the 200 answer a client may ask for with Accept
        (a Media, such as NDJSON lines of improving answers).
    problems: status -> when that problem is answered; 400, 401, 403 and 413 are added
        from access, body and query (api.openapi).
    path: path parameter -> what it is.
    """

    summary: str
    description: str = ""
    access: str = "read"
    body: type[BaseModel] | None = None
    csv: str | None = None
    query: type[BaseModel] | None = None
    answers: Mapping[int, type[BaseModel] | Media] = field(default_factory=dict)
    stream: Media | None = None
    problems: Mapping[int, str] = field(default_factory=dict)
    path: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if self.access not in ACCESS:
            raise ValueError(f"access must be one of {ACCESS}, not {self.access!r}")
        if self.csv and self.body is None:
            raise ValueError("a CSV body is an alternative to a JSON body model: declare body too")


def operation(**contract) -> Callable[[Callable], Callable]:
    """Decorates a view with its contract (the keywords of Operation); the view is
    called with the path parameters and `body` and/or `query` as declared. Put it
    below the route decorator."""
    op = Operation(**contract)

    def decorate(view):
        @wraps(view)
        def endpoint(**kwargs):
            authorize(op.access)
            if op.body is not None:
                kwargs["body"] = _body(op)
            if op.query is not None:
                kwargs["query"] = query_string(op.query)
            return view(**kwargs)

        endpoint.operation = op
        return endpoint

    return decorate


def _body(op: Operation):
    if op.csv:
        if is_csv():
            return csv_rows()
        if not is_json():
            raise unsupported_type(f"JSON ({JSON_TYPE}) or CSV with a header line (text/csv)")
    return json_body(op.body)
