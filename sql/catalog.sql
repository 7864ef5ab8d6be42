-- The catalog of datasets. Each dataset also has a grid table, grids_<name>, created by
-- gridagg.directory (its box columns depend on the number of dimensions).
CREATE TABLE IF NOT EXISTS gridagg_datasets (
    name        text PRIMARY KEY,
    definition  jsonb NOT NULL,
    leaf_count  integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now()
);
