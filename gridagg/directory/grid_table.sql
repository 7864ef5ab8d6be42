-- The grid directory of one dataset, as in the paper: leaf grids only, ceil(n/2) box
-- columns (two dimensions per box, the last one degenerate when n is odd) and one
-- composite GiST index over all of them. `version` is the directory version that made
-- the leaf, so a process holding the tree can read just the leaves added since its own.
-- {table}, {box_columns}, {index} and {index_columns} are filled in by gridagg.directory.leaves.
CREATE TABLE {table} (
    {box_columns},
    grid_id   text PRIMARY KEY,
    next_dim  integer NOT NULL,
    version   bigint NOT NULL
);
CREATE INDEX {index} ON {table} USING gist ({index_columns});
CREATE INDEX {version_index} ON {table} (version);
