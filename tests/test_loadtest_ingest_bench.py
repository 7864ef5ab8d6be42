"""The bulk-ingest benchmark's table (pure): speeds as multiples of each store alone's."""

from __future__ import annotations

from gridagg_loadtest.bench.ingest import HBASE_ALONE, PG_ALONE, table


def test_table_gives_speeds_against_each_store_alone_at_its_fastest():
    lines = table([("gridagg ingest, run 1", 1000, 4.0), (f"{PG_ALONE}, run 1", 1000, 6.0),
                   (f"{PG_ALONE}, run 2", 1000, 5.0), (HBASE_ALONE, 1000, 40.0)])
    assert lines[0].split("|")[5:7] == ["   x PostgreSQL alone ", "        x HBase alone "]
    ratios = [[float(c) for c in line.split("|")[5:7]] for line in lines[2:]]
    assert ratios == [[1.25, 10.0], [0.83, 6.67], [1.0, 8.0], [0.12, 1.0]]


def test_table_without_peers_has_no_ratio_columns():
    lines = table([("gridagg ingest", 1000, 2.0)])
    assert lines[0].count("|") == 5 and lines[2].endswith("|        500 |")
