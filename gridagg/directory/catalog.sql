-- The catalog of datasets. Each dataset also has a grid table, grids_<name>, created by
-- gridagg.directory (its box columns depend on the number of dimensions). `version`
-- takes a value never used before whenever anything of the dataset changes (its leaves,
-- or rows and aggregates), and gridagg_changes says what: a process holding the tree in
-- memory reads what changed since its own version (gridagg.tree). `pruned` is the
-- newest version whose log entry was deleted: a process older than that reloads.
CREATE SEQUENCE IF NOT EXISTS gridagg_directory_versions;
CREATE TABLE IF NOT EXISTS gridagg_datasets (
    name        text PRIMARY KEY,
    definition  jsonb NOT NULL,
    leaf_count  integer NOT NULL DEFAULT 0,
    version     bigint NOT NULL DEFAULT nextval('gridagg_directory_versions'),
    pruned      bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per committed change: the leaves whose rows or aggregates changed, or NULL
-- for "any of them" (a bulk load, a repair). Kept CHANGE_LOG_SECONDS (gridagg.directory.changes).
CREATE TABLE IF NOT EXISTS gridagg_changes (
    dataset     text NOT NULL,
    version     bigint NOT NULL,
    grids       text[],
    at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (dataset, version)
);

-- Leaves replaced by a split. Their rows stay under the old keys until no query that
-- may still see the old directory can be running (gridagg.writes), then are purged.
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
-- An insert's new rows (gridagg.writes.pack_rows): recovery stores those that did not
-- land (HBase stores a multi-row put row by row).
ALTER TABLE gridagg_intents ADD COLUMN IF NOT EXISTS rows bytea;

-- Write stamps (gridagg.stamps): the end of the last span of stamps reserved by a
-- holder of the dataset's writer lock, in nanoseconds.
CREATE TABLE IF NOT EXISTS gridagg_stamps (
    dataset     text PRIMARY KEY,
    reserved    bigint NOT NULL
);

-- Catalogs made before the change log.
ALTER TABLE gridagg_datasets ADD COLUMN IF NOT EXISTS pruned bigint NOT NULL DEFAULT 0;

-- How long a dataset keeps its rows (gridagg.write.retain): a duration such as '10y',
-- rows older than it are dropped; NULL keeps every row.
ALTER TABLE gridagg_datasets ADD COLUMN IF NOT EXISTS retain text;

-- A change applied in place (gridagg.write.change, a leaf too small to be cut): every
-- row its leaves hold after it, as one segment whose element IDs are the row keys;
-- recovery writes them again, so such a change ends whole once its intent is recorded.
ALTER TABLE gridagg_intents ADD COLUMN IF NOT EXISTS contents bytea;
