"""The in-memory leaf index (pure logic): for any leaves and any box it lists exactly the
leaves PostgreSQL's && would, with <@ as the "fully inside" flag."""

from __future__ import annotations

from hypothesis import given, strategies as st

from gridagg.directory import LeafIndex
from gridagg.grid import Grid


@st.composite
def leaves_and_box(draw):
    ndim = draw(st.integers(1, 4))
    interval = st.tuples(st.integers(-50, 50), st.integers(0, 40)).map(lambda t: (t[0], t[0] + t[1]))
    boxes = draw(st.lists(st.tuples(*[interval] * ndim), max_size=40))
    leaves = [Grid(f"0{i:b}", box, i % ndim) for i, box in enumerate(boxes)]
    query = draw(st.tuples(*[interval] * ndim))
    return ndim, leaves, query, draw(st.integers(0, ndim - 1))


@given(leaves_and_box())
def test_index_lists_exactly_the_touched_leaves(case):
    ndim, leaves, query, axis = case
    rows = [(g.grid_id, g.next_axis, *[v for lo_hi in g.box for v in lo_hi]) for g in leaves]
    index = LeafIndex(version=1, rows=rows, ndim=ndim, axis=axis)
    found = {g.grid_id: (g, full) for g, full in index.intersecting(query)}
    expected = {g.grid_id: (g, g.contains_box(query)) for g in leaves if g.intersects(query)}
    assert found == expected
    assert len(index) == len(leaves)
