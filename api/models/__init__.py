"""The HTTP API's bodies as pydantic models: what a request may hold and what an answer
holds. One declaration serves three ends: requests are parsed and checked with them
(api.contract), /openapi.json is generated from them (api.openapi), and a 400 names the
field and says what it must be in the words of the field's description (api.validation).

A request model checks a body's *shape*: types, list lengths, key names, the form of
names, aggregates and durations. What needs a dataset's definition is checked by the
core when the engine parses the query or definition, with the same kind of 400 naming
the field: which dimensions and columns exist, a bound's decimals against its column's
scale, domains and timestamps (gridagg.query.spec.QuerySpec.parse and SeriesSpec.parse,
gridagg.model.schema.Column and Dataset), whether a polygon is valid and the dataset has
lon/lat dimensions (gridagg.query.regions.Region), rows one by one (gridagg.model.schema.Dataset.
encode_row: a bad row is reported in the answer, not refused with a 400).

Answer models describe what the core writes (gridagg.query.spec.QueryResult.to_json and
friends); they are not built at run time. tests/test_api.py checks real answers against
them, so a field the core adds or drops shows up there.

Modules follow the blueprints: common (base classes, shared value types), geojson
(regions), queries, datasets, leaves, ops.
"""
