-- The catalog of datasets. Each dataset also has a grid table, grids_<name>, created by
-- gridagg.directory (its box columns depend on the number of dimensions). `version`
-- takes a value never used before whenever the dataset's leaves change (and when it is
-- created), so a process holding the leaves in memory can tell whether they are current.
CREATE SEQUENCE IF NOT EXISTS gridagg_directory_versions;
CREATE TABLE IF NOT EXISTS gridagg_datasets (
    name        text PRIMARY KEY,
    definition  jsonb NOT NULL,
    leaf_count  integer NOT NULL DEFAULT 0,
    version     bigint NOT NULL DEFAULT nextval('gridagg_directory_versions'),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Leaves replaced by a split. Their rows stay under the old keys until no query that
-- may still see the old directory can be running (see GridEngine), then are purged.
CREATE TABLE IF NOT EXISTS gridagg_retired (
    dataset     text NOT NULL,
    grid_id     text NOT NULL,
    retired_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (dataset, grid_id)
);

-- Write intents: the leaves a write is about to touch. A row left here means a writer
-- died mid-write; recovery recomputes those leaves' aggregates from their rows.
CREATE TABLE IF NOT EXISTS gridagg_intents (
    id          bigserial PRIMARY KEY,
    dataset     text NOT NULL,
    grids       text[] NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now()
);
