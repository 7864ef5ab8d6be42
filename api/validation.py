"""Checking a request against its model, and turning what pydantic finds into one 400
that names the field and says, in one sentence, what it must be.

The sentence comes from the model's JSON schema, the same one /openapi.json shows: the
error's location is followed through the schema to the field, whose description
completes "<field> must be ..." (api.models.common). Only the first problem is told
(an unknown key before the others: a misspelt key explains a missing one). A value
that matches none of the members of a union (a bound, a duration) is told at the union,
with the union's description. pydantic's own multi-line report never reaches a client.
"""

from __future__ import annotations

import json
from functools import cache

from pydantic import BaseModel, ValidationError

from gridagg.model.errors import InvalidInput

from .models.common import SchemaGenerator
from .problems import ApiProblem

SHOWN_CHARS = 60


def parse_json(model: type[BaseModel], raw: bytes) -> BaseModel:
    """The model of a JSON body; ApiProblem (malformed JSON) or InvalidInput (a wrong
    field) otherwise."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise _problem(model, exc, lambda: json.loads(raw), "body") from None


def parse_data(model: type[BaseModel], data: dict, source: str = "query") -> BaseModel:
    """The model of values already read (a query string); InvalidInput otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _problem(model, exc, lambda: data, source) from None


@cache
def _schema(model: type[BaseModel]) -> dict:
    return model.model_json_schema(schema_generator=SchemaGenerator)


def _problem(model: type[BaseModel], exc: ValidationError, data, source: str) -> Exception:
    """The 400 for the first of exc's errors. data: a callable giving what the client
    sent, to show the value at the field; source: "body" or "query"."""
    errors = exc.errors(include_url=False)
    error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    if error["type"] == "json_invalid" and not error["loc"]:
        return ApiProblem(400, "Malformed JSON", f"the request body is not valid JSON: {error['ctx']['error']}",
                          field="body", slug="malformed-json")
    spot = _Spot(_schema(model), error["loc"])
    if error["type"] == "extra_forbidden" and spot.whole:
        return InvalidInput(_unknown(spot, source), field=spot.path)
    if error["type"] == "missing" and spot.whole:
        return InvalidInput(f"{spot.path} is required" + (f": {spot.description}" if spot.description else ""),
                            field=spot.path)
    value = spot.value(data, error["input"])
    if not spot.path:
        expected = spot.description if spot.node.get("type") != "object" else "a JSON object"
        return InvalidInput(f"the request body must be {expected}, not {_show(value)}", field="body")
    if spot.description is None:  # every field has one (tests/test_api_errors.py): a last resort
        return InvalidInput(f"{spot.path}: {error['msg']}", field=spot.path)
    return InvalidInput(f"{spot.path} must be {spot.description}, not {_show(value)}", field=spot.path)


def _unknown(spot: "_Spot", source: str) -> str:
    names = []
    for name, prop in spot.parent.get("properties", {}).items():
        node, _ = spot.unwrap(prop)
        key = node.get("propertyNames", {}).get("x-name") if source == "query" else None
        names.append(f"{name}.<{key}>" if key else name)
    what = "query parameter" if source == "query" else "key"
    where = f" in {spot.parent_path}" if spot.parent_path else ""
    return f"unknown {what} {spot.key!r}{where}: use {', '.join(names)}"


def _show(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


class _Spot:
    """Where an error's location leads in a model's JSON schema: the field's path as a
    client writes it (where.lon[0]), its schema node and description, and its parent.
    whole is False when the location was cut short at an untagged union."""

    def __init__(self, schema: dict, loc: tuple):
        self.defs = schema.get("$defs", {})
        self.node, self.description = self.unwrap(schema)
        self.parent, self.parent_path = self.node, ""
        self.path, self.key, self.steps, self.whole = "", None, [], True
        for key in loc:
            node = self.node
            if "discriminator" in node:  # a tagged union: the key is the tag, naming the member
                self.node, self.description = self.unwrap({"$ref": node["discriminator"]["mapping"][key]})
                continue
            if "anyOf" in node or "oneOf" in node:  # an untagged union: the value matched no member
                self.whole = False
                return
            self.parent, self.parent_path, self.key = node, self.path, key
            if isinstance(key, int):
                child = node.get("items", {})
                self.path += f"[{key}]"
            else:
                extra = node.get("additionalProperties")
                child = node.get("properties", {}).get(key) or (extra if isinstance(extra, dict) else {})
                self.path += f".{key}" if self.path else key
            self.steps.append(key)
            self.node, self.description = self.unwrap(child)

    def unwrap(self, node: dict) -> tuple[dict, str | None]:
        """The node behind references and 'or null', and the first description on the way."""
        description = node.get("description")
        while True:
            if "$ref" in node:
                node = self.defs[node["$ref"].rsplit("/", 1)[1]]
            elif "anyOf" in node and "discriminator" not in node:
                members = [m for m in node["anyOf"] if m.get("type") != "null"]
                if len(members) != 1:
                    break
                node = members[0]
            else:
                break
            description = description or node.get("description")
        return node, description

    def value(self, data, fallback):
        """The client's value at the path (data: a callable giving what was sent)."""
        try:
            value = data()
        except (ValueError, RecursionError):
            return fallback
        for step in self.steps:
            # A value a validator turned into a list ('a,b' in a query string) has no such step.
            if isinstance(step, int):
                if not isinstance(value, list) or not 0 <= step < len(value):
                    return fallback
            elif not isinstance(value, dict) or step not in value:
                return fallback
            value = value[step]
        return value
