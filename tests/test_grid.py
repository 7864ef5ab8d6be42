"""The grid tree's pure logic: IDs, salt bytes, row keys, pre-split, cuts."""

from __future__ import annotations

from gridagg.model.grid import (
    Grid,
    ancestors,
    children,
    choose_cut,
    element_of,
    grid_prefix,
    prefix_range,
    presplit,
    row_key,
    salt,
    subtree_range,
)


def test_salt_matches_the_papers_worked_example():
    # Grid 00111: the bits after the leading 0 are 0111, padded 01110000 = 112.
    assert salt("00111") == 112
    assert row_key("00111", b"2") == bytes([112]) + b"00111-2"
    assert salt("0") == 0
    assert salt("01") == 128
    assert salt("0111111111") == 255  # only the 8 bits after the leading 0 count


def test_every_subtree_is_one_contiguous_key_range():
    # All leaves at depth 11: deeper than the 8 salt bits, so both regimes are covered.
    leaves = [format(i, "011b") for i in range(2**10)]
    leaves = ["0" + g[1:] for g in leaves]  # IDs start with the root "0"
    keys = sorted((row_key(g, b"e"), g) for g in leaves)
    order = [g for _, g in keys]
    for g in ["0", "01", "0011", "00111", "0101010", "011001100", "0110011001"]:
        positions = [i for i, leaf in enumerate(order) if leaf.startswith(g)]
        assert positions == list(range(positions[0], positions[-1] + 1)), g


def test_prefix_range_and_element_of():
    start, stop = prefix_range(grid_prefix("0011"))
    assert start <= row_key("0011", b"abc") < stop
    assert not start <= row_key("00110", b"abc") < stop  # a child's rows are not the grid's own
    assert element_of(row_key("0011", b"x-y")) == b"x-y"


def test_ancestors_root_first():
    assert ancestors("0110") == ["0", "01", "011"]


def test_presplit_halves_time_until_l_time():
    domain = ((0, 7 * 86400 - 1), (0, 10))
    grids = presplit(domain, time_axis=0, l_time=86400 * 2)
    assert [g.grid_id for g in grids] == ["000", "001", "010", "011"]
    assert all(g.box[0][1] - g.box[0][0] + 1 <= 2 * 86400 for g in grids)
    assert all(g.next_axis == 1 for g in grids)
    # The leaves tile the domain exactly.
    assert grids[0].box[0][0] == 0 and grids[-1].box[0][1] == 7 * 86400 - 1
    for a, b in zip(grids, grids[1:]):
        assert a.box[0][1] + 1 == b.box[0][0]


def test_cut_moves_to_next_axis_when_values_are_all_equal():
    # Axis 0 holds one value only: a cut there would leave a child empty.
    assert choose_cut(0, 4, sums=[20, 10], mins=[5, 1], maxs=[5, 4], ndim=2) == (1, 2)
    # Every axis constant: no cut at all (the caller leaves the leaf as it is).
    assert choose_cut(1, 4, sums=[20, 4], mins=[5, 1], maxs=[5, 1], ndim=2) is None


def test_cut_is_floor_of_mean_and_both_children_get_rows():
    axis, cut = choose_cut(0, 3, sums=[-4, 0], mins=[-3, 0], maxs=[1, 0], ndim=2)
    assert (axis, cut) == (0, -2)  # mean -4/3 -> floor -2; -3 goes low, 1 goes high
    lower, upper = children(Grid("0", ((-10, 10), (0, 0)), 0), axis, cut, ndim=2)
    assert lower.box[0] == (-10, -2) and upper.box[0] == (-1, 10)
    assert lower.grid_id == "00" and upper.grid_id == "01" and lower.next_axis == 1


def test_subtree_range_holds_exactly_the_subtree():
    ids = {"0"}
    frontier = ["0"]
    for _ in range(11):
        frontier = [c for g in frontier[:40] for c in (g + "0", g + "1")]
        ids.update(frontier)
    probes = ["0", "00", "01", "0010", "00111", "0110011", "01100110", "011001100", "0110011001"]
    for p in probes:  # each probe, its ancestors, their siblings and a few descendants
        ids.update(p[:i] for i in range(1, len(p) + 1))
        ids.update(p[:i - 1] + ("1" if p[i - 1] == "0" else "0") for i in range(2, len(p) + 1))
        ids.update(p + tail for tail in ("0", "1", "00", "0111", "101010101"))
    for s in probes:
        start, stop = subtree_range(s)
        for g in ids:
            key = row_key(g, b"e")
            assert (start <= key < stop) == g.startswith(s), (s, g)
