"""/openapi.json, written from the endpoints' contracts (api.contract) and their models
(api.models): a walk over the app's routes. A route that declares no contract is an
error, so every route is documented, and only routes are.

Problems an endpoint may answer because of its contract are added here: 400 for a body
or query string, 413 for a body, 401 for read or write access, 403 for write access.
"""

from __future__ import annotations

import inspect
import re

from flask import Flask
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from werkzeug.routing import Rule

from gridagg import __version__

from .contract import Media, Operation
from .models.common import SchemaGenerator
from .models.ops import Problem

PROBLEM_TYPE = "application/problem+json"
_CACHE_KEY = "gridagg_openapi"

BAD_INPUT = "malformed input: the detail names the field (field) and says what it must be"
TOO_LARGE = "the body is larger than the configured limit (GRIDAGG_MAX_BODY_BYTES)"
READ_DENIED = "a read token is configured (GRIDAGG_READ_TOKEN) and the bearer token is missing or wrong"
WRITE_DENIED = "the bearer token is missing or wrong"
WRITES_OFF = "writes are disabled: no write token is configured (GRIDAGG_WRITE_TOKEN)"


def document(app: Flask) -> dict:
    """The OpenAPI 3.1 document of `app` (built once per app)."""
    doc = app.extensions.get(_CACHE_KEY)
    if doc is None:
        doc = app.extensions[_CACHE_KEY] = _document(app)
    return doc


def operations(app: Flask) -> list[tuple[Rule, Operation]]:
    """Every route of `app` with its contract; LookupError for a route without one."""
    out = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        op = getattr(app.view_functions[rule.endpoint], "operation", None)
        if op is None:
            raise LookupError(f"route {rule.rule} ({rule.endpoint}) declares no contract: decorate its view "
                              "with api.contract.operation")
        out.append((rule, op))
    return sorted(out, key=lambda pair: pair[0].rule)


def _document(app: Flask) -> dict:
    routes = operations(app)
    models = {Problem}
    for _, op in routes:
        models.update(m for m in (op.body, op.query, *op.answers.values()) if isinstance(m, type))
    refs, defs = models_json_schema([(m, "validation") for m in sorted(models, key=lambda m: m.__name__)],
                                    ref_template="#/components/schemas/{model}", schema_generator=SchemaGenerator)
    schemas = defs.get("$defs", {})
    writer = _Writer(refs, schemas)
    paths: dict = {}
    for rule, op in routes:
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            paths.setdefault(_path(rule), {})[method.lower()] = writer.operation(rule, op)
    for _, op in routes:  # a query string's model is written as parameters, not as a schema
        if op.query is not None:
            schemas.pop(_name(refs[(op.query, "validation")]), None)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "gridagg",
            "version": __version__,
            "description": "Exact range aggregates over sensor archives: boxes, polygon regions and "
                           "time series over a k-d grid of partial aggregates. Writes need "
                           "'Authorization: Bearer <GRIDAGG_WRITE_TOKEN>'; reads are open unless "
                           "GRIDAGG_READ_TOKEN is set. Errors are problem details (RFC 9457).",
        },
        "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": paths,
    }


def _path(rule: Rule) -> str:
    return re.sub(r"<(?:[^<>:]+:)?([^<>]+)>", r"{\1}", rule.rule)


def _name(ref: dict) -> str:
    return ref["$ref"].rsplit("/", 1)[1]


def _summary(model: type[BaseModel]) -> str:
    return inspect.cleandoc(model.__doc__ or model.__name__).split("\n\n")[0].replace("\n", " ")


class _Writer:
    def __init__(self, refs: dict, schemas: dict):
        self.refs, self.schemas = refs, schemas

    def ref(self, model: type[BaseModel]) -> dict:
        return self.refs[(model, "validation")]

    def operation(self, rule: Rule, op: Operation) -> dict:
        out: dict = {"operationId": rule.endpoint.replace(".", "_"), "summary": op.summary}
        description = [op.description] if op.description else []
        parameters = [{"name": name, "in": "path", "required": True, "description": op.path[name],
                       "schema": {"type": "string"}} for name in sorted(rule.arguments)]
        if op.query is not None:
            params, notes = self.query_parameters(op.query)
            parameters += params
            description += notes
        if description:
            out["description"] = "\n\n".join(description)
        if parameters:
            out["parameters"] = parameters
        if op.body is not None:
            content = {"application/json": {"schema": self.ref(op.body)}}
            if op.csv:
                content["text/csv"] = {"schema": {"type": "string", "description": op.csv}}
            out["requestBody"] = {"required": True, "content": content}
        if op.access != "open":
            # Reads need a token only when one is configured: either way is allowed.
            out["security"] = [{"bearer": []}] if op.access == "write" else [{}, {"bearer": []}]
        out["responses"] = self.responses(op)
        return out

    def responses(self, op: Operation) -> dict:
        out = {}
        for status, answer in sorted(op.answers.items()):
            if isinstance(answer, Media):
                out[str(status)] = {"description": answer.description,
                                    "content": {answer.type: {"schema": dict(answer.schema)}}}
            else:
                out[str(status)] = {"description": _summary(answer),
                                    "content": {"application/json": {"schema": self.ref(answer)}}}
            if status == 200 and op.stream is not None:
                out["200"]["content"][op.stream.type] = {"schema": dict(op.stream.schema)}
                out["200"]["description"] += f" With Accept: {op.stream.type}: {op.stream.description}"
        problems = {}
        if op.body is not None or op.query is not None:
            problems[400] = BAD_INPUT
        if op.body is not None:
            problems[413] = TOO_LARGE
        if op.access == "read":
            problems[401] = READ_DENIED
        elif op.access == "write":
            problems[401], problems[403] = WRITE_DENIED, WRITES_OFF
        problems.update(op.problems)
        for status, text in sorted(problems.items()):
            out[str(status)] = {"description": text, "content": {PROBLEM_TYPE: {"schema": self.ref(Problem)}}}
        return out

    def query_parameters(self, model: type[BaseModel]) -> tuple[list[dict], list[str]]:
        """The parameters of a query string model, and notes for the description on the
        pattern-named ones (an object field f is given as f.<key>=value parameters,
        which OpenAPI cannot name)."""
        schema = self.schemas[_name(self.ref(model))]
        required = set(schema.get("required", []))
        params, notes = [], []
        for name, prop in schema["properties"].items():
            prop = dict(_not_null(prop))
            description = prop.pop("description", "")
            prop.pop("default", None)
            if prop.get("type") == "object":
                key = prop.get("propertyNames", {}).get("x-name", "key")
                notes.append(f"{name}.<{key}> parameters: {description}.")
                continue
            param = {"name": name, "in": "query", "required": name in required, "description": description,
                     "schema": prop}
            if prop.get("type") == "array":  # a,b,c
                param.update(style="form", explode=False)
            params.append(param)
        return params, notes


def _not_null(prop: dict) -> dict:
    """A property's schema without its 'or null' (an absent parameter is the null)."""
    members = [m for m in prop.get("anyOf", []) if m.get("type") != "null"]
    if len(members) == 1 and len(prop["anyOf"]) == 2:
        return {**{k: v for k, v in prop.items() if k != "anyOf"}, **members[0]}
    return prop
