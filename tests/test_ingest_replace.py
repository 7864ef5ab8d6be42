"""`gridagg ingest --replace`: a bulk reload of a stretch (a reprocessed month) replaces
the stored rows of its element IDs and adds the new ones, into the embedded store and
HBase (as HFiles and through the Thrift gateway); every aggregate and answer is then
that of the reloaded rows. Without --replace the same file adds only its new rows."""

from __future__ import annotations

import random

import numpy as np
import pytest
from engine_support import check_tree
from gridagg_ingest import hfiles
from gridagg_ingest.config import parse_config
from gridagg_ingest.job import Progress, run_ingest, spark_session

from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.store import open_store


@pytest.fixture(scope="module")
def spark(settings, services):
    s = spark_session("local[2]", shuffle_partitions=2, settings=settings.with_(store="hbase"))
    yield s
    s.stop()


def config(name: str):
    return parse_config({
        "dataset": {"name": name},
        "grid": {"n_size": 60, "n_threshold": 240},
        "input": {"format": "csv", "delimiter": ";", "id": ["sensor", "when"]},
        "dimensions": [
            {"name": "t", "type": "time", "min": "2024-01-01T00:00:00Z", "max": "2024-12-31T23:59:59Z",
             "source": "when", "format": "yyyy-MM-dd HH:mm:ss"},
            {"name": "x", "scale": 2, "min": -10, "max": 10, "source": "x"},
        ],
        "measures": [{"name": "reading", "source": "reading"}],
    })


def archive(path, rows: dict) -> None:
    """A CSV of rows {(sensor, when): (x, reading)}."""
    path.write_text("sensor;when;x;reading\n" + "".join(f"{s};{w};{x};{r}\n" for (s, w), (x, r) in rows.items()))


def encoded(cfg, rows: dict) -> np.ndarray:
    from datetime import datetime, timezone

    t, x, r = cfg.dataset.columns
    return np.array([[t.encode(datetime.strptime(w, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)), x.encode(xv),
                      r.encode(rv)] for (_, w), (xv, rv) in rows.items()], np.int64)


@pytest.mark.parametrize("store", ["embedded", "hbase-hfiles", "hbase-thrift"])
def test_a_reload_with_replace_corrects_a_month(spark, settings, services, unique_name, tmp_path, monkeypatch, store):
    s = settings.with_(data_dir=tmp_path, store="embedded") if store == "embedded" else settings.with_(store="hbase")
    if store == "hbase-thrift":
        monkeypatch.setattr(hfiles, "available", lambda *args: False)
    engine = GridEngine(GridDirectory(s.effective_pg_url), open_store(s))
    cfg = config(unique_name)
    rng = random.Random(3)
    rows = {(f"s{i % 7}", f"2024-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:00"):
            (rng.randint(-900, 900) / 100, rng.randint(0, 9999)) for i in range(2400)}
    march = {key: (x, value + 10_000) for key, (x, value) in rows.items() if key[1].startswith("2024-03")}
    added = {(f"n{i}", f"2024-03-{1 + i % 28:02d} 12:00:00"): (0.5, i) for i in range(30)}
    (tmp_path / "all").mkdir()
    (tmp_path / "march").mkdir()
    archive(tmp_path / "all" / "a.csv", rows)
    archive(tmp_path / "march" / "a.csv", {**march, **added})

    def load(folder, **kw):
        return run_ingest(spark, s, cfg, [str(tmp_path / folder / "a.csv")], progress=Progress(quiet=True),
                          directory=engine.directory, store=engine.store, **kw)

    try:
        assert load("all").loaded == len(rows)
        skipped = load("march")
        assert (skipped.loaded, skipped.replaced, skipped.duplicates) == (len(added), 0, len(march))
        kept = {**rows, **added}
        check_tree(engine, unique_name, encoded(cfg, kept))
        summary = load("march", replace=True)
        assert (summary.loaded, summary.replaced, summary.duplicates) == (0, len(march) + len(added), 0)
        assert "replaced" in "\n".join(summary.lines())
        kept = {**rows, **march, **added}
        values = encoded(cfg, kept)
        check_tree(engine, unique_name, values)
        assert engine.check(unique_name) == []
        got = engine.query(unique_name, {"t": ["2024-03-01T00:00:00Z", "2024-03-31T23:59:59Z"]},
                           ["count", "sum:reading"]).values
        in_march = [v for (_, w), (_, v) in kept.items() if w.startswith("2024-03")]
        assert [got["count"], got["sum:reading"]] == [len(in_march), sum(in_march)]
        again = load("march", replace=True)  # a rerun replaces each row by itself: the same rows
        assert again.replaced == len(march) + len(added)
        check_tree(engine, unique_name, values)
    finally:
        engine.drop_dataset(unique_name)
        engine.close()
