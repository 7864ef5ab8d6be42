"""Bulk-ingest benchmark: end-to-end rows/s of the job next to PostgreSQL COPY of the
same encoded rows, measured in one run.

    python -m ingest.generate --rows 1000000 --out /tmp/gen-1m
    python -m ingest.bench ingest/examples/weather_generated.toml /tmp/gen-1m

1. the job (run_ingest) loads the inputs into a fresh dataset: read -> encode -> tree ->
   rows in the store + aggregates + directory committed in PostgreSQL (timed end to end,
   Spark session start excluded);
2. the same good rows, encoded by the same Spark code, are collected once (not timed)
   and COPYed into a plain PostgreSQL table (element ID + one bigint per column; timed:
   COPY + commit).

The store is whatever GRIDAGG_STORE / --store says (default embedded). The dataset and
the COPY table are dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
import uuid
from dataclasses import replace

from gridagg.config import Settings


def copy_rows(settings: Settings, table: str, rows: list[tuple], ncols: int) -> float:
    """Seconds to COPY rows (eid, c0..) into a fresh plain table and commit."""
    import psycopg

    cols = ", ".join(f"c{i} bigint" for i in range(ncols))
    buf = io.StringIO()
    for r in rows:
        buf.write("\t".join(str(v) for v in r))
        buf.write("\n")
    data = buf.getvalue().encode()
    with psycopg.connect(settings.effective_pg_url) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} (eid text, {cols})")
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            with cur.copy(f"COPY {table} FROM STDIN") as cp:
                step = 1 << 20
                for i in range(0, len(data), step):
                    cp.write(data[i:i + step])
        conn.commit()
        return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ingest.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("config")
    p.add_argument("inputs", nargs="+")
    p.add_argument("--master", default="local[*]")
    p.add_argument("--store", choices=["embedded", "hbase"])
    p.add_argument("--keep", action="store_true", help="keep the dataset and the COPY table")
    p.add_argument("--no-copy", action="store_true", help="skip the COPY baseline")
    args = p.parse_args(argv)

    from gridagg.directory import GridDirectory
    from gridagg.engine import GridEngine
    from gridagg.store import open_store

    from .config import load_config
    from .encode import encode
    from .job import Progress, run_ingest, spark_session
    from .readers import expand_inputs, read_source

    settings = Settings.from_env()
    if args.store:
        settings = settings.with_(store=args.store)
    cfg = load_config(args.config)
    name = f"bench_{uuid.uuid4().hex[:8]}"
    cfg = replace(cfg, dataset=replace(cfg.dataset, name=name))
    spark = spark_session(args.master)
    spark.range(1).count()  # session warm-up, not timed

    progress = Progress(spark=spark)
    summary = run_ingest(spark, settings, cfg, args.inputs, progress=progress)
    print("\n".join(summary.lines()))
    job_rate = summary.read / summary.seconds

    copy_rate = None
    if not args.no_copy:
        ncols = len(cfg.dataset.columns)
        enc = encode(read_source(spark, cfg, expand_inputs(args.inputs)), cfg)
        good = enc.filter("_reason IS NULL").select("_eid", *[f"c{i}" for i in range(ncols)])
        rows = [tuple(r) for r in good.toLocalIterator()]
        secs = copy_rows(settings, f"{name}_copy", rows, ncols)
        copy_rate = len(rows) / secs
        if not args.keep:
            import psycopg

            with psycopg.connect(settings.effective_pg_url, autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {name}_copy")

    if not args.keep:
        engine = GridEngine(GridDirectory(settings.effective_pg_url), open_store(settings))
        engine.drop_dataset(name)
        engine.store.close()
        engine.directory.close()
    spark.stop()

    print()
    print(f"{'what':<44} {'rows':>10} {'seconds':>9} {'rows/s':>10}")
    print(f"{'gridagg ingest (' + settings.store + ' store + PostgreSQL)':<44} {summary.read:>10} "
          f"{summary.seconds:>9.1f} {job_rate:>10,.0f}")
    if copy_rate is not None:
        print(f"{'PostgreSQL COPY (plain table, same rows)':<44} {len(rows):>10} {len(rows) / copy_rate:>9.1f} "
              f"{copy_rate:>10,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
