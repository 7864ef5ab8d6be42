"""Base classes of the API's bodies and the value types several of them share.

Every field's description completes the sentence "<field> must be ...": it documents
the field in /openapi.json and is the expected part of the 400 for a wrong value
(api.validation), so write it that way.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.json_schema import GenerateJsonSchema

from gridagg.model.schema import NAME_RE
from gridagg.query.spec import FUNCTIONS

NAME = NAME_RE.pattern.strip("^$")
NAME_TEXT = "lowercase letters, digits and '_', starting with a letter, at most 48 characters"


def _optional_not_null(schema: dict[str, Any]) -> None:
    """A field declared with a None default but a type without None may be left out and
    is never null (a request then takes the core's default; an answer leaves it out when
    it has no value): document it as optional, without a null default."""
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None:
            del prop["default"]


class SchemaGenerator(GenerateJsonSchema):
    """JSON schemas as /openapi.json shows them: no title on every field (a field's
    name and description say it all)."""

    def field_title_should_be_set(self, schema) -> bool:
        return False


class Request(BaseModel):
    """A request body or query string: unknown keys are refused and values are not
    coerced (a string is no number, 1 is no true)."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_optional_not_null)


class Answer(BaseModel):
    """An answer body, as documentation (answers are written by the core as dicts)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_optional_not_null)


Bound = Annotated[
    Union[int, float, str, None],
    Field(description="a number, an ISO 8601 timestamp, or null for an open end"),
]
Range = Annotated[list[Bound], Field(
    min_length=2, max_length=2,
    description="[lo, hi] in user units: two bounds, each a number, an ISO 8601 timestamp "
                "or null for an open end; both ends belong to the range",
)]
# A key naming a dimension. x-name names such keys where the key is part of a parameter's
# name (where.<dimension>=lo,hi in a query string); JSON Schema keeps no title there.
Dimension = Annotated[str, WithJsonSchema({"type": "string", "description": "a dimension's name",
                                           "x-name": "dimension"})]
Where = Annotated[dict[Dimension, Range], Field(
    description="an object of dimension: [lo, hi] in user units (null for an open end), such as "
                "{\"lon\": [-5, 5], \"time\": [\"2012-06-01T00:00:00Z\", null]}; dimensions left out "
                "span their whole domain",
)]
Aggregate = Annotated[str, Field(
    pattern=rf"^(count|({'|'.join(FUNCTIONS)}):{NAME})$",
    description=f"an aggregate: count (rows), or one of {', '.join(FUNCTIONS)}, a colon and a "
                "column, such as 'avg:temperature' (count:<column> counts the column's values)",
)]
Aggregates = Annotated[list[Aggregate], Field(
    min_length=1,
    description="a non-empty list of aggregates such as [\"count\", \"avg:temperature\"]",
)]
Explain = Annotated[bool, Field(
    description="true or false: true adds the IDs of the grids reused and scanned to the plan",
)]
Deadline = Annotated[int, Field(
    ge=0, le=3_600_000,
    description="milliseconds the answer may take (0: from the tree alone, no row read); past them the "
                "answer holds bounds for what was not read (exact false) instead of waiting; left out: "
                "exact, however long it takes",
)]

# An answer's value: a count, a number in user units, a timestamp; null when no row had one.
Value = Union[int, float, str, None]
