"""One blueprint per resource: datasets (definitions, grids, rows), queries (box and
polygon aggregates, series) and ops (health, metrics, OpenAPI)."""
