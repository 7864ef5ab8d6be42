"""A late write on the local HBase: a writer killed while its rows wait in the Thrift
gateway may have them land after the next writer's recovery (issue 30). Recovery seals
the dead writer's leaves with later write stamps (gridagg.model.stamps), so they change
nothing; this shows it on the real gateway.

Each round: the HBase master is killed; a writer takes the writer lock, records its
intent and sends a batch's rows, as GridEngine.insert_encoded does, and the gateway holds
the request (HBase is away) and retries it; the writer is killed; HBase is started; the
next writer inserts a batch at once (recovering the dead writer's intent first). `check`
right after, and again once the gateway has had time to retry: without the fence, rows
stored after the recovery were counted in no aggregate.

    python -m gridagg_loadtest.soak.late_write --rounds 3      # kills and starts the local HBase: own servers only

Prints each round's two checks and how many rounds ended with uncounted rows; `repair`
mends each before the next round. Exit code 1 when some did.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
import uuid

from gridagg.cli import services
from gridagg.config import Settings
from gridagg.model.grid import row_key

from .clients import batch_rows, definition, element_ids, open_engine

RETRY_SECONDS = 30.0  # long enough for the gateway's retries of the dead writer's request


def _doomed_writer(settings: Settings, name: str, tag: str, sending) -> None:
    engine = open_engine(settings)
    ds = engine.dataset(name)
    rows, ids = batch_rows(tag, 0), element_ids(tag, 0)
    leaf_of = engine.directory.locate(ds, rows[:, :2])
    with engine.writing(ds, "insert") as write:
        write.intend(sorted(set(leaf_of)))
        sending.set()
        write.put_rows([row_key(g, e) for g, e in zip(leaf_of, ids)], rows)  # held: HBase is away


def run(settings: Settings, rounds: int, progress=print) -> int:
    """The rounds (see the module docstring); returns how many left uncounted rows."""
    engine = open_engine(settings)
    name = "late_" + uuid.uuid4().hex[:8]
    ds = engine.create_dataset(definition(name))
    engine.insert_encoded(ds, element_ids("0.0", 0), batch_rows("0.0", 0))
    ctx = mp.get_context("spawn")
    bad = 0
    try:
        for r in range(rounds):
            services.hbase_crash(settings, "master")
            sending = ctx.Event()
            writer = ctx.Process(target=_doomed_writer, args=(settings, name, f"1.{r}", sending))
            writer.start()
            sending.wait(60)
            time.sleep(3)  # its rows are in the gateway, which retries
            writer.kill()
            writer.join()
            services.hbase_up(settings)
            engine.insert_encoded(ds, element_ids(f"2.{r}", 0), batch_rows(f"2.{r}", 0))
            right_after = engine.check(ds.name)
            time.sleep(RETRY_SECONDS)
            later = engine.check(ds.name)
            progress(f"round {r}: check after the next writer: {right_after[:2] or 'clean'}; "
                     f"{RETRY_SECONDS:g} s later: {later[:3] or 'clean'}")
            if later:
                bad += 1
                engine.repair(ds.name)
        return bad
    finally:
        engine.drop_dataset(name)
        engine.directory.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gridagg_loadtest.soak.late_write", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="rounds (default 3), about 30-60 s each")
    args = ap.parse_args(argv)
    settings = Settings.from_env().with_(store="hbase")
    bad = run(settings, args.rounds)
    print(f"rounds that left rows counted in no aggregate: {bad} of {args.rounds}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
