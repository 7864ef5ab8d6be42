"""The bench's third step, in this process: the paper's Table 3 quantities of every
gridagg dataset, and the workload's p50 in process for gridagg's planner and for the
peers that run in process (DuckDB, ClickHouse through chDB) at each of their thread
settings, on the same boxes."""

from __future__ import annotations

import statistics

from gridagg.config import Settings
from gridagg.query.spec import QuerySpec

from ..peers import IN_PROCESS, open_peer
from ..peers.registry import PeerRegistry
from . import workload
from .systems import System, engine_of


def table3_stats(settings: Settings, system: System, queries: list[dict], total_rows: int) -> dict:
    """The paper's Table 3 quantities averaged over the workload, in-process."""
    with engine_of(settings, system.store) as engine:
        s = [engine.query(system.dataset, w, workload.AGGREGATES["sum"]) for w in queries]
        m = [engine.query(system.dataset, w, workload.AGGREGATES["min"]) for w in queries]

    def mean(xs):
        return statistics.fmean(xs) if xs else 0.0

    sel = mean([r.count for r in s])
    return {
        "selected_rows": sel,
        "selectivity_pct": 100 * sel / total_rows if total_rows else 0.0,
        "reused_before": mean([r.plan.reused_grids_before for r in s]),
        "reused_after": mean([r.plan.reused_grids_after for r in s]),
        "rows_reused": mean([r.plan.rows_in_reused_grids for r in s]),
        "reuse_rate_pct": 100 * mean([r.plan.rows_in_reused_grids / r.count for r in s if r.count]),
        "scanned_before": mean([r.plan.scanned_grids_before for r in s]),
        "scanned_after_min": mean([r.plan.scanned_grids_after for r in m]),
        "rows_scanned_sum": mean([r.plan.rows_in_scanned_grids for r in s]),
        "skip_rate_min_pct": 100 * mean([r.plan.skip_rate or 0 for r in m]),
        "total_grids": mean([r.plan.total_grids for r in s]),
    }


def inprocess_p50(settings: Settings, systems: list[System], queries: list[dict], warmup: list[dict]) -> dict[str, dict]:
    """p50 ms of the workload's sum and min queries in this process: each gridagg system
    through its engine (the planner), each in-process peer at each of its thread
    settings (same boxes). Each is measured warm, as a serving process runs: after
    answering the `warmup` boxes (others than those measured), so none is timed loading
    its tree or its first pages. Returns label -> {"sum": ms, "min": ms}."""

    def p50(run, ds) -> dict[str, float]:
        row = {}
        for agg in ("sum", "min"):
            for w in warmup:
                run(ds, QuerySpec.parse(ds, w, workload.AGGREGATES[agg]))
            specs = [QuerySpec.parse(ds, w, workload.AGGREGATES[agg]) for w in queries]
            row[agg] = statistics.median([run(ds, q).plan.elapsed_ms for q in specs])
        return row

    out: dict[str, dict] = {}
    for s in systems:
        if s.kind == "gridagg":
            with engine_of(settings, s.store) as engine:
                out[s.label] = p50(engine.run, engine.dataset(s.dataset))
    reg = PeerRegistry(settings.effective_pg_url)
    try:
        for s in systems:
            if s.kind not in IN_PROCESS:
                continue
            ds = reg.lookup(s.kind, s.dataset)
            peer = open_peer(s.kind, settings)
            try:
                for threads in s.knobs["threads"]:
                    peer.set_threads(threads)
                    out[f"{s.label}, {threads} thread{'s' if threads > 1 else ''}"] = p50(peer.run, ds)
            finally:
                peer.close()
    finally:
        reg.close()
    return out
