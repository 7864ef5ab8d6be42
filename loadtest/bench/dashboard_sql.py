"""The dashboard's questions as plain SQL for an in-process peer (DuckDB, ClickHouse
through chDB; loadtest/peers): box predicates, GROUP BY a time bucket for a series, a
window function over every bucket for a moving window; only the statistics the
aggregates ask (peers.common.statistics). Answers are stored integers, as gridagg's."""

from __future__ import annotations

from gridagg.model.aggregate import PartialAggregate
from gridagg.model.schema import Dataset
from gridagg.query.spec import QuerySpec, SeriesSpec

from ..peers.common import SqlPeer, aggregate_of, box_where, select_list, statistics


def answer(peer: SqlPeer, ds: Dataset, body: dict) -> list[dict]:
    """The peer's answers to a question's HTTP body (a series when it has a step): one
    dict of stored-integer values per point (one for a plain query)."""
    if "step" not in body:
        spec = QuerySpec.parse(ds, body.get("where"), body["aggregates"], body.get("region"))
        return [peer.run(ds, spec).values]
    s = SeriesSpec.parse(ds, body.get("where"), body["aggregates"], body["step"], body.get("window"),
                         body.get("start"), body.get("end"), body.get("region"))
    spec = s.query
    stats = statistics(ds, spec)
    where, params = box_where(ds, spec, peer.placeholder)
    t = f'"{ds.dimensions[ds.time_axis].name}"'
    columns = select_list(ds, stats, peer.sum_of).split(", ")
    per_bucket = (f"SELECT {peer.floor_div(f'{t} - {s.base}', s.step)} AS b, "
                  f"{', '.join(f'{x} AS s{i}' for i, x in enumerate(columns))} FROM {peer.table(ds)}{where} GROUP BY b")
    if s.width == 1:
        rows = peer.fetch(ds, per_bucket, params)
    else:  # the moving window: a window function over every bucket, empty ones too
        roll = [f"{'min' if x.startswith('min') else 'max' if x.startswith('max') else 'sum'}(p.s{i}) OVER w"
                for i, x in enumerate(columns)]
        rows = peer.fetch(ds, f"WITH p AS ({per_bucket}), g AS ({peer.numbers(s.buckets)}) "
                              f"SELECT g.b, {', '.join(roll)} FROM g LEFT JOIN p ON g.b = p.b "
                              f"WINDOW w AS (ORDER BY g.b ROWS BETWEEN {s.width - 1} PRECEDING AND CURRENT ROW)", params)
    found = {int(r[0]): r[1:] for r in rows}
    empty = PartialAggregate.empty(len(ds.columns))
    out = []
    for i in range(s.points):
        r = found.get(i + s.width - 1)
        agg = aggregate_of(ds, stats, r) if r is not None else empty
        out.append(spec.values(agg if agg.count else empty))
    return out
