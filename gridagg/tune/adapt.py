"""The tree adapted to the questions asked: from a sample of the questions served
(gridagg.query.questions) and the store's cost model (gridagg.tune.costmodel), leaves too large for
the questions that cut them are split in place (gridagg.write.leafsplit) and small leaves the
questions cut together are merged in place (gridagg.tune.merge), as writes of kind "tune" of
at most CHANGES_PER_WRITE changes each.

Pricing. Each sampled question is walked over the tree as the planner walks it
(gridagg.query.walk): a leaf it reads costs per_grid + per_row x its rows, a grid it
answers from its aggregate per_reused. A change is priced on the questions it concerns,
before and after:
- a split of leaf L (cut at the limits L/2, L/4, ... as gridagg.write.split cuts, or at the
  bounds of the questions that read it: each one's own, and those most of them share;
  the best wins): the questions that read L paid its read; after, each pays, for each
  leaf the split makes (with its data bounds, from L's rows), what the walk would pay
  there: a read, a reused aggregate or nothing. A cut at a question's bound puts L's
  rows inside the box in grids of their own: a dashboard asks the same ranges again
  and again, and mean cuts alone leave nearly every leaf across their bounds;
- a merge of inner grid G holding at most N_threshold rows (so that no insert splits it
  at once): every question paid what it paid at the grids below G; after, what it
  would pay at G as one leaf, or, for the topmost such grids the questions pay most
  below, at G's rows split anew as a leaf's are (a later round makes that split, once
  the old leaves' rows are purged). The tree the load made cuts on every axis in turn,
  so a question's bound on one axis crosses many small leaves; only a merge can undo
  that, and only its split after makes it pay. Of the merges worth making, those saving
  most in all are chosen (a grid's own merge, or the best of its children's, from the
  leaves up).
A change is planned when it saves more than MARGIN of what its questions paid before,
so that noise in the sample does not swing the tree back and forth; a round's changes
are made when together they save more than WORTH of what the whole sample costs, so that
changes saving next to nothing do not keep it moving. (Each change alone is a small
share of the sample's cost in a tree of many leaves: a question that cuts 500 leaves
spends 0.2% of its cost at each.) A merge and splits of leaves below it are
alternatives: the larger gain wins. Only the
questions cut decide: a part of the tree no question reads is left as it is (but for
room under the leaf budget, below).

A leaf budget (`most_leaves`: gridagg.tree.TreeCache.leaves_loadable of the
tree_load_seconds setting) bounds the splits: every process that serves the dataset
loads the whole tree, and a load's time and memory grow with its grids. Merges free
room; splits then go in the order of what they save per leaf they add, while they fit.
When some do not, parts of the tree no sampled question goes to are merged to make room
(inner grids of at most N_threshold rows: the sample pays nothing more), so the leaves
move to where the questions go; a tree over its budget is merged back within it the same
way. A split left out stays unsettled: it is priced again once there is room.

Planning reads the rows of the leaves it may split without the writer lock; the changes
are then made under it, a batch per write, each checked first against the tree as it is
then (another writer may have changed it in between: such a change is left for the next
round).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from gridagg.model.aggregate import PartialAggregate
from gridagg.model.grid import Grid
from gridagg.query.questions import Question
from gridagg.query.walk import face, walk
from gridagg.tree import TreeState
from gridagg.tune.costmodel import CostModel
from gridagg.tune.merge import Merge, merge
from gridagg.write.change import cut_axis, leaves_below
from gridagg.write.leafsplit import split_leaf
from gridagg.write.split import split_rows

# A change must save more than this share of what its questions paid before,
MARGIN = 0.1
# and a round's changes together more than this share of what the sample's questions
# cost in all (predicted): rounds worth less than that only churn.
WORTH = 0.001
# Changes per write: each a few store calls and a directory switch; a writer waiting for
# the lock waits for one batch, not the whole round.
CHANGES_PER_WRITE = 16
# Leaves a round of the online tuner may price for a split (their rows are read to price
# it), the dearest first; a tuning run of its own (`gridagg tune NAME`, the benches) may
# price more a round: TUNE_CANDIDATES.
SPLIT_CANDIDATES = 64
TUNE_CANDIDATES = 1024
# Merges priced as their rows split anew a round: one for each this many split candidates
# (each reads up to N_threshold rows, as much as many leaves priced for a split): the
# online tuner 2, a tuning run of its own 32.
RESPLIT_SHARE = 32
# Limits tried for a split: a leaf's rows halved up to this many times.
SPLIT_DEPTH = 6
# Sets of the questions' bounds tried for a split: the most asked this many.
BOUND_SETS = 4
# A series' bucket starts a cut may follow, per question and leaf.
BUCKET_CUTS = 8


@dataclass
class Change:
    """One change in place: kind "split" (leaf `grid_id` cut while a grid holds more than
    `limit` rows, into `new_leaves` leaves) or "merge" (inner grid `grid_id` made one leaf
    in place of `leaves`); `rows` in it; `before` and `after`, the predicted milliseconds
    its sampled questions spend on these grids."""

    kind: str
    grid_id: str
    rows: int
    before: float
    after: float
    leaves: list[str] = field(default_factory=list)
    limit: int = 0
    new_leaves: int = 0
    cuts: tuple[tuple[int, int], ...] = ()  # a split at the questions' bounds: (axis, at)
    resplit: bool = False  # a merge priced with the split of its rows a later round makes

    @property
    def gain(self) -> float:
        return self.before - self.after


@dataclass
class Adapted:
    """A round's changes (planned, and made when applied: those still valid under the
    lock), the number of sampled questions they were priced on, how many leaves the round
    found no split worth making for (added to the rounds' settled set), and how many
    splits worth making it left out for the leaf budget."""

    changes: list[Change]
    questions: int
    settled: int = 0
    held: int = 0  # splits worth making left out: the tree is at its leaf budget
    waiting: int = 0  # splits worth making of merged leaves whose old leaves' rows await their purge

    @property
    def still(self) -> bool:
        """Whether the round changed nothing, priced no leaf it had not priced before and
        left no split waiting for a purge: further rounds on the same sample would change
        nothing either."""
        return not self.changes and not self.settled and not self.waiting

    def gain_per_question(self) -> float:
        """Predicted milliseconds saved per question of the sample."""
        return sum(c.gain for c in self.changes) / self.questions if self.questions else 0.0


def prices(model: CostModel, q, lo: np.ndarray, hi: np.ndarray, count: np.ndarray) -> np.ndarray:
    """What question `q` (a gridagg.query.walk.WalkQuery) would pay, in predicted ms, at each
    of these grids were it a leaf the walk reached: data bounds lo/hi ((g, ndim)), rows
    `count` ((g,)). A read where the box or polygon cuts it (or its rows span buckets of a
    series), the reuse of its aggregate where it lies inside, nothing outside."""
    touches = np.all((lo <= q.qhi) & (hi >= q.qlo), axis=1)
    inside = np.all((lo >= q.qlo) & (hi <= q.qhi), axis=1)
    if q.edges.shape[0]:
        for i in np.flatnonzero(touches).tolist():
            state = face(lo[i, q.lon_axis] / q.lon_scale, hi[i, q.lon_axis] / q.lon_scale,
                          lo[i, q.lat_axis] / q.lat_scale, hi[i, q.lat_axis] / q.lat_scale, q.edges, q.eps)
            touches[i] = state > 0
            inside[i] &= state == 2
    if q.t_axis >= 0:
        t = q.t_axis
        inside &= (lo[:, t] - q.base) // q.step == (hi[:, t] - q.base) // q.step
    read = touches & ~inside & (count > 0)
    return np.where(read, model.per_grid + model.per_row * count, np.where(touches, model.per_reused, 0.0))


def plan(engine, ds, tree: TreeState, model: CostModel, questions: list[Question], retired: set[str],
         candidates: int = SPLIT_CANDIDATES, settled: set | None = None,
         most_leaves: int | None = None) -> tuple[list[Change], int, int]:
    """The changes `questions` ask for in dataset `ds`'s `tree` (splits first, then
    merges; none of them touching a grid in `retired`), priced with `model`, how many
    splits worth making were left out so that the tree keeps at most `most_leaves`
    leaves (None: no limit) and how many wait for a purge (_plan_splits). Reads from
    engine.store the rows of the leaves it prices for a split (the dearest `candidates`,
    but those in `settled`) and of the grids it prices as merged and split anew
    (_resplit_prices); adds to `settled` the leaves priced with no split worth making, as
    (grid ID, rows), and the grids priced split anew, as ("resplit", grid ID, rows)."""
    settled = set() if settled is None else settled
    paid = np.zeros(tree.n)  # what the questions paid at each grid
    readers: dict[int, list[int]] = {}  # leaf -> the questions that read it
    cost = model.per_grid + model.per_row * tree.aggs.count
    for k, q in enumerate(questions):
        reused, _, scan, *_ = walk(tree, q.query)
        np.add.at(paid, scan, cost[scan])
        np.add.at(paid, reused, model.per_reused)
        for i in scan.tolist():
            readers.setdefault(i, []).append(k)
    floor = WORTH * (paid.sum() + model.per_query * len(questions))
    planned, waiting = _plan_splits(engine, ds, tree, model, questions, paid, readers, retired, candidates, settled)
    splits = {c.grid_id: c for c in planned}
    deepest_first = sorted(range(tree.n), key=lambda j: -len(tree.ids[j]))
    below = _below(tree, paid, deepest_first)
    merges = []
    for m in _plan_merges(engine, tree, model, ds, questions, below, deepest_first, retired,
                          candidates // RESPLIT_SHARE, settled):
        # A merge and splits of its leaves are alternatives, priced alike: the larger gain wins.
        inside = [g for g in m.leaves if g in splits]
        if m.gain > sum(splits[g].gain for g in inside):
            merges.append(m)
            for g in inside:
                del splits[g]
    kept, held = _within(list(splits.values()), merges, tree.leaf_count, most_leaves)
    over = most_leaves is not None and tree.leaf_count > most_leaves
    if held or over:  # room from parts of the tree no sampled question goes to
        need = sum(c.new_leaves - 1 for c in splits.values()) - (most_leaves - tree.leaf_count) - \
            sum(len(m.leaves) - 1 for m in merges)
        merges += _unread_merges(tree, model, ds, questions, below, retired, merges, need)
        kept, held = _within(list(splits.values()), merges, tree.leaf_count, most_leaves)
    changes = kept + merges
    # A tree over its budget (the setting lowered, or a load slower than the last) is
    # merged back within it where no question goes, though the sample gains nothing.
    return (changes if over or sum(c.gain for c in changes) > floor else []), held, waiting


def _within(splits: list[Change], merges: list[Change], leaves: int, most: int | None) -> tuple[list[Change], int]:
    """The splits that fit a tree of `leaves` leaves under `most` once `merges` are made
    (the most saved per leaf added first), and how many did not."""
    if most is None:
        return splits, 0
    room = most - leaves + sum(len(m.leaves) - 1 for m in merges)
    kept = set()
    for k in sorted(range(len(splits)), key=lambda k: -splits[k].gain / (splits[k].new_leaves - 1)):
        if splits[k].new_leaves - 1 <= room:
            kept.add(k)
            room -= splits[k].new_leaves - 1
    return [c for k, c in enumerate(splits) if k in kept], len(splits) - len(kept)


def _plan_splits(engine, ds, tree: TreeState, model: CostModel, questions: list[Question], paid: np.ndarray,
                 readers: dict[int, list[int]], retired: set[str], candidates: int,
                 settled: set) -> tuple[list[Change], int]:
    """The splits worth making, and how many more wait for a purge: a leaf with a retired
    grid below it (merged, its old leaves' rows not purged yet) is not split, as its
    children's IDs would take keys that still hold those rows."""
    count = tree.aggs.count
    # Every prefix of a retired ID, at once: testing each leaf against each retired ID took
    # a large share of a round over a large tree.
    above_retired = {r[:k] for r in retired for k in range(1, len(r) + 1)}
    leaves = [i for i in readers if count[i] >= 2 and (tree.ids[i], int(count[i])) not in settled]
    leaves.sort(key=lambda i: -paid[i])
    out, waiting = [], 0
    for i in leaves[:candidates]:
        g = tree.ids[i]
        grid = engine.directory.grid(ds, g)
        _, values = engine.store.read_grid(ds, g)
        if len(values) < 2:
            continue
        agg = engine.store.get_aggregates(ds, [g])[g]
        best = _best_split(model, [questions[q].query for q in readers[i]], grid, values, agg, ds.ndim)
        if best is None or paid[i] - best[0] <= MARGIN * paid[i]:
            settled.add((g, int(count[i])))
        elif g in above_retired:
            waiting += 1
        else:
            out.append(Change("split", g, int(count[i]), float(paid[i]), best[0], limit=best[1], new_leaves=best[2],
                              cuts=best[3]))
    return out, waiting


def _best_split(model: CostModel, asked: list, grid: Grid, values: np.ndarray, agg: PartialAggregate,
                ndim: int) -> tuple[float, int, int, tuple] | None:
    """The best split of leaf `grid` holding `values` (aggregate `agg`) for the questions
    `asked` (at halved limits, or at their bounds): (what they would pay after, limit,
    leaves made, cuts), or None when no split cuts it."""
    best = None
    for k in range(1, SPLIT_DEPTH + 1):
        limit = len(values) >> k
        if limit < 1:
            break
        done = split_rows(grid, values, agg, limit, limit, ndim, aggregates=False)
        if not done.splits:
            break
        after = _priced(model, asked, values, done, ndim)
        if best is None or after < best[0]:
            best = (after, limit, len(done.leaves), ())
    lo, hi = values[:, :ndim].min(axis=0), values[:, :ndim].max(axis=0)
    for cuts in bound_sets(asked, lo, hi):
        done = split_rows(grid, values, agg, 0, 0, ndim, cuts, aggregates=False)
        after = _priced(model, asked, values, done, ndim)
        if done.splits and (best is None or after < best[0]):
            best = (after, 0, len(done.leaves), cuts)
    return best


def _priced(model: CostModel, asked: list, values: np.ndarray, done, ndim: int) -> float:
    """What the questions `asked` would pay at the leaves of split `done` of `values`."""
    parts = [ix for _, ix, _ in done.leaves if len(ix)]
    rows = np.array([len(ix) for ix in parts])
    dims = values[np.concatenate(parts), :ndim]
    starts = np.concatenate(([0], np.cumsum(rows)[:-1]))
    lo, hi = np.minimum.reduceat(dims, starts, axis=0), np.maximum.reduceat(dims, starts, axis=0)
    return sum(float(prices(model, q, lo, hi, rows).sum()) for q in asked)


def bounds_inside(q, lo: np.ndarray, hi: np.ndarray) -> list[tuple[int, int]]:
    """The cuts (axis, at: rows <= at go low) at question `q`'s own bounds that fall
    between a leaf's least values `lo` and greatest `hi`: each bound of its box, and for a
    series the starts of its buckets (at most BUCKET_CUTS)."""
    out = []
    for a in range(len(lo)):
        if lo[a] < q.qlo[a] <= hi[a]:
            out.append((a, int(q.qlo[a]) - 1))
        if lo[a] <= q.qhi[a] < hi[a]:
            out.append((a, int(q.qhi[a])))
    if q.t_axis >= 0:
        t = q.t_axis
        first = q.base + ((max(int(lo[t]), int(q.qlo[t])) - q.base) // q.step + 1) * q.step
        last = min(int(hi[t]), int(q.qhi[t]))
        out += [(t, b - 1) for b in range(first, last + 1, q.step)[:BUCKET_CUTS]]
    return out


def bound_sets(asked: list, lo: np.ndarray, hi: np.ndarray) -> list[tuple[tuple[int, int], ...]]:
    """The sets of cuts a split at the questions' bounds tries for a leaf with least and
    greatest values lo/hi that the questions `asked` read: the bounds most of them share
    (most shared first), then each question's own, the most asked BOUND_SETS of them."""
    own = Counter(tuple(bounds_inside(q, lo, hi)) for q in asked)
    each = Counter(c for cuts in own.elements() for c in set(cuts))
    shared = tuple(sorted((c for c, n in each.items() if 2 * n > len(asked)), key=lambda c: (-each[c], c)))
    sets = [shared] + [cuts for cuts, _ in own.most_common(BOUND_SETS)]
    return [cuts for k, cuts in enumerate(sets) if cuts and cuts not in sets[:k]]


def _below(tree: TreeState, paid: np.ndarray, deepest_first: list[int]) -> np.ndarray:
    """What the questions paid at each grid and every grid below it."""
    below = paid.copy()
    for i in deepest_first:
        if tree.parent[i] >= 0:
            below[tree.parent[i]] += below[i]
    return below


def _unread_merges(tree: TreeState, model: CostModel, ds, questions: list[Question], below: np.ndarray,
                   retired: set[str], merges: list[Change], need: int) -> list[Change]:
    """Merges that cost the sampled questions nothing, freeing at least `need` leaves if
    there are that many: inner grids of at most N_threshold rows that no question paid for
    below and none would pay for as one leaf, the topmost of each such part of the tree,
    those freeing most leaves first; none inside a merge of `merges`."""
    count = tree.aggs.count
    candidates = np.flatnonzero((tree.left >= 0) & (count <= ds.grid.n_threshold) & (below == 0))
    after = np.zeros(len(candidates))
    for q in questions:
        after += prices(model, q.query, tree.dlo[candidates], tree.dhi[candidates], count[candidates])
    free = np.zeros(tree.n + 1, bool)  # the last slot stands for the root's parent (-1)
    free[candidates[after == 0]] = True
    tops = np.flatnonzero(free[:-1] & ~free[tree.parent])
    taken = tuple(m.grid_id for m in merges)
    out, freed = [], 0
    for i in sorted(tops.tolist(), key=lambda i: -int(tree.leaves_below[i])):
        if freed >= need:
            break
        g = tree.ids[i]
        leaves = leaves_below(tree, i)
        if g.startswith(taken) or g in retired or retired.intersection(leaves):
            continue
        out.append(Change("merge", g, int(count[i]), 0.0, 0.0, leaves=leaves))
        freed += len(leaves) - 1
    return out


def _plan_merges(engine, tree: TreeState, model: CostModel, ds, questions: list[Question], below: np.ndarray,
                 deepest_first: list[int], retired: set[str], resplits: int, settled: set) -> list[Change]:
    count = tree.aggs.count
    candidates = np.flatnonzero((tree.left >= 0) & (count <= ds.grid.n_threshold) & (below > 0))
    if not len(candidates):
        return []
    after = np.zeros(len(candidates))
    for q in questions:
        after += prices(model, q.query, tree.dlo[candidates], tree.dhi[candidates], count[candidates])
    resplit = _resplit_prices(engine, tree, model, ds, questions, below, candidates, retired, resplits, settled)
    for k, price in resplit.items():
        after[k] = min(after[k], price)
    gain = np.full(tree.n, -np.inf)  # what merging grid i saves (-inf: not to be merged)
    worth = below[candidates] - after > MARGIN * below[candidates]
    gain[candidates[worth]] = (below[candidates] - after)[worth]
    # The best set of merges below each grid: its own merge or its children's best.
    best = np.zeros(tree.n)
    for i in deepest_first:
        if tree.left[i] >= 0:
            best[i] = max(gain[i], best[tree.left[i]] + best[tree.right[i]])
    after_of = dict(zip(candidates.tolist(), after.tolist()))
    resplit_of = {int(candidates[k]) for k, price in resplit.items() if after[k] == price}
    out, stack = [], [tree.root]
    while stack:
        i = stack.pop()
        if tree.left[i] < 0 or best[i] <= 0:
            continue
        g = tree.ids[i]
        if gain[i] >= best[i] and g not in retired:
            leaves = leaves_below(tree, i)
            if not retired.intersection(leaves):
                out.append(Change("merge", g, int(count[i]), float(below[i]), after_of[i], leaves=leaves,
                                  resplit=i in resplit_of))
                continue
        stack += [int(tree.left[i]), int(tree.right[i])]
    return sorted(out, key=lambda c: c.grid_id)


def _resplit_prices(engine, tree: TreeState, model: CostModel, ds, questions: list[Question], below: np.ndarray,
                    candidates: np.ndarray, retired: set[str], resplits: int, settled: set) -> dict[int, float]:
    """What the questions would pay at merge candidates (`candidates`: rows of inner
    grids) were each merged and its rows then split as a leaf's are (_best_split), by
    position in `candidates`: the topmost candidates the questions pay most below, at most
    `resplits` of them, none priced before (in `settled`). Reads their rows."""
    count = tree.aggs.count
    is_candidate = np.zeros(tree.n + 1, bool)  # the last slot stands for the root's parent (-1)
    is_candidate[candidates] = True
    tops = [k for k, i in enumerate(candidates.tolist()) if not is_candidate[tree.parent[i]]
            and ("resplit", tree.ids[i], int(count[i])) not in settled]
    out = {}
    for k in sorted(tops, key=lambda k: -below[candidates[k]])[:resplits]:
        i = int(candidates[k])
        leaves = leaves_below(tree, i)
        if tree.ids[i] in retired or retired.intersection(leaves):
            continue
        values = np.concatenate([engine.store.read_grid(ds, leaf)[1] for leaf in leaves])
        box = np.stack([tree.dlo[i], tree.dhi[i]])
        asked = [q.query for q in questions if prices(model, q.query, box[:1], box[1:], count[i:i + 1])[0] > 0]
        grid = Grid(tree.ids[i], tuple(zip(tree.lo[i].tolist(), tree.hi[i].tolist())), cut_axis(tree, i))
        best = _best_split(model, asked, grid, values, PartialAggregate.of_rows(values, len(ds.columns)), ds.ndim)
        if best is not None and below[i] - best[0] > MARGIN * below[i]:
            out[k] = best[0]
        # Priced once a run, worth it or not: the dearest are otherwise priced again every
        # round while merges elsewhere wait.
        settled.add(("resplit", tree.ids[i], int(count[i])))
    return out


def adapt(engine, name: str, model: CostModel, questions: list[Question], apply: bool = True,
          wait: float | None = None, candidates: int = SPLIT_CANDIDATES, settled: set | None = None,
          most_leaves: int | None = None) -> Adapted:
    """The changes `questions` (a sample of dataset `name`'s) ask for, priced with `model`
    (at most `candidates` leaves priced for a split: a round's reads), made in place when
    `apply` (writes of kind "tune" through engine.writing, waiting `wait` seconds for the
    writer lock, None: as long as it takes); returns those made (all those planned when
    not applying). Rounds on one sample pass one `settled` set along: a leaf priced with
    no split worth making is not priced again, and each round reaches further down the
    leaves the questions read (Adapted.still says when to stop). Splits keep the tree
    within `most_leaves` leaves (None: no limit; see the module docstring)."""
    ds = engine.dataset(name)
    tree = engine.trees.tree(ds)
    settled = set() if settled is None else settled
    known = len(settled)
    planned, held, waiting = plan(engine, ds, tree, model, questions,
                                  set(engine.directory.retired_before(ds.name, 0)), candidates, settled, most_leaves)
    if not apply:
        return Adapted(planned, len(questions), len(settled) - known, held, waiting)
    if waiting and not planned:
        _purge_when_due(engine, ds, wait)
    made = []
    for start in range(0, len(planned), CHANGES_PER_WRITE):
        batch = planned[start:start + CHANGES_PER_WRITE]
        with engine.writing(ds, "tune", wait) as write:
            now = engine.trees.tree(ds)
            done = [c for c in batch if _make(write, now, c)]
            if done:
                write.end([c.grid_id for c in done])
        made += done
    return Adapted(made, len(questions), len(settled) - known, held, waiting)


def _purge_when_due(engine, ds, wait: float | None) -> None:
    """Purge the rows of retired grids that are due (a write with nothing in it:
    gridagg.write.protocol purges first), so that the leaves merged in their place can be split:
    when `wait` is None (a tuning run of its own) once every grid retired so far is due,
    waiting for that; else those due now (the online tuner: its next round tries again)."""
    after = engine.purge_after_seconds

    def not_due() -> set[str]:
        return set(engine.directory.retired_before(ds.name, 0)) - set(engine.directory.retired_before(ds.name, after))

    if wait is None:
        pending, until = not_due(), time.monotonic() + after
        while pending & not_due() and time.monotonic() < until:
            time.sleep(min(1.0, after))
    if engine.directory.retired_before(ds.name, after):
        with engine.writing(ds, "tune", wait):
            pass


def _make(write, tree: TreeState, c: Change) -> bool:
    """Make change `c` as steps of `write` if the tree still is as it was planned on."""
    i = tree.index.get(c.grid_id)
    if i is None or int(tree.aggs.count[i]) != c.rows:
        return False
    if c.kind == "split":
        if tree.left[i] >= 0:
            return False
        agg = write.store.get_aggregates(write.ds, [c.grid_id])[c.grid_id]
        return split_leaf(write, c.grid_id, agg, c.limit, c.limit, c.cuts) > 0
    if tree.left[i] < 0 or leaves_below(tree, i) != c.leaves:
        return False
    merge(write, tree, Merge(c.grid_id, c.leaves, c.rows))
    return True

