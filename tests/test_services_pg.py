"""Against the real PostgreSQL: boxes, a composite GiST index, && and <@ queries."""

from __future__ import annotations

import random

import pytest

N = 20_000


@pytest.fixture
def boxes(pg_conn, unique_name):
    """Table with two box columns (space and time x value), random small boxes, ANALYZEd."""
    t = unique_name
    rng = random.Random(7)
    pg_conn.execute(f"create table {t} (id bigint primary key, space box not null, tv box not null)")
    rows = []
    for i in range(N):
        x, y = rng.uniform(0, 1000), rng.uniform(0, 1000)
        tt, v = rng.uniform(0, 10_000), rng.uniform(-50, 50)
        rows.append((i, f"(({x},{y}),({x + rng.uniform(0, 5)},{y + rng.uniform(0, 5)}))",
                     f"(({tt},{v}),({tt + rng.uniform(0, 50)},{v + rng.uniform(0, 2)}))"))
    with pg_conn.cursor() as cur:
        with cur.copy(f"copy {t} (id, space, tv) from stdin") as copy:
            for r in rows:
                copy.write_row(r)
    pg_conn.execute(f"create index {t}_gist on {t} using gist (space, tv)")
    pg_conn.execute(f"analyze {t}")
    yield t
    pg_conn.execute(f"drop table {t}")


def overlap_ids(rows, sx, tv):
    """Reference answer in Python."""
    def ov(a, b):
        return a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]
    return sorted(i for i, s, t in rows if ov(s, sx) and ov(t, tv))


def fetch_boxes(pg_conn, t):
    out = []
    for i, s, tv in pg_conn.execute(
            f"select id, array[(space[1])[0], (space[1])[1], (space[0])[0], (space[0])[1]],"
            f" array[(tv[1])[0], (tv[1])[1], (tv[0])[0], (tv[0])[1]] from {t}"):
        out.append((i, s, tv))
    return out


def test_database_and_role(pg_conn, settings):
    assert pg_conn.execute("select current_database()").fetchone()[0] == "gridagg" or settings.pg_url
    assert pg_conn.execute("select 1").fetchone() == (1,)


def test_overlap_and_containment_use_gist(pg_conn, boxes):
    t = boxes
    q_overlap = (f"select id from {t} where space && box '((100,100),(300,300))' "
                 f"and tv && box '((2000,-10),(4000,10))' order by id")
    # Box operators have fixed selectivity estimates (areasel), so with 20k rows the
    # planner picks the GiST index for selective && / <@ without any enable_* settings.
    plan = "\n".join(r[0] for r in pg_conn.execute("explain " + q_overlap))
    assert f"{t}_gist" in plan, plan

    got = [r[0] for r in pg_conn.execute(q_overlap)]
    ref = overlap_ids(fetch_boxes(pg_conn, t), (100, 100, 300, 300), (2000, -10, 4000, 10))
    assert got == ref and got  # some rows, exactly the right ones

    q_inside = (f"select id from {t} where space <@ box '((0,0),(300,300))' "
                f"and tv <@ box '((0,-50),(3000,0))' order by id")
    plan = "\n".join(r[0] for r in pg_conn.execute("explain " + q_inside))
    assert f"{t}_gist" in plan, plan
    got_inside = [r[0] for r in pg_conn.execute(q_inside)]
    ref_inside = sorted(
        i for i, s, tv in fetch_boxes(pg_conn, t)
        if 0 <= s[0] and s[2] <= 300 and 0 <= s[1] and s[3] <= 300
        and 0 <= tv[0] and tv[2] <= 3000 and -50 <= tv[1] and tv[3] <= 0)
    assert got_inside == ref_inside and got_inside

