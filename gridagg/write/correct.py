"""Corrections: rows that replace the stored rows of their element IDs (an insert with
`on_conflict: "replace"`, GridEngine.correct), written as a change of kind "correct"
(gridagg.write.change): the old values leave every aggregate and the new ones enter, at
once for every reader.

A row is the stored row of its element ID in the leaf its dimensions place it in, as an
insert's duplicate is: correct measures freely (a recalibrated sensor); a row whose
dimensions move it to another leaf is a new row there, so a correction of a position
or a time is a delete and an insert. A row whose element ID is not stored there is
added; a row equal to the stored one changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from gridagg.store import segments
from gridagg.write.change import Content


@dataclass
class Corrections:
    """The leaves a correction touches, with their Content, and how many of its rows
    replaced a stored row, were added, or changed nothing."""

    contents: dict[str, Content] = field(default_factory=dict)
    replaced: int = 0
    added: int = 0
    unchanged: int = 0


def corrected(write, element_ids: list[bytes], values: np.ndarray) -> Corrections:
    """What the rows (element IDs, (m, ncols) encoded values; an element ID given twice:
    the last row wins) do to the leaves of dataset write.ds."""
    ds = write.ds
    eids, values = segments.last_of_each(segments.element_ids(element_ids), np.asarray(values, np.int64))
    leaf_of = np.array(write.directory.locate(ds, values[:, : ds.ndim]), dtype=object)
    out = Corrections()
    for g in sorted(set(leaf_of.tolist())):
        mine = np.flatnonzero(leaf_of == g)
        new_eids, new_values = eids.take(pa.array(mine)), values[mine]
        old_eids, old_values = write.store.read_grid(ds, g)
        at = {e: i for i, e in enumerate(old_eids.to_pylist())}
        kept = np.ones(len(old_values), bool)  # stored rows the leaf keeps as they are
        changed = []  # stored rows replaced by other values
        for e, row in zip(new_eids.to_pylist(), new_values):
            i = at.get(e)
            if i is not None:
                kept[i] = False
                if (old_values[i] == row).all():
                    out.unchanged += 1
                    continue
                changed.append(i)
        added = len(new_values) - int((~kept).sum())
        out.added += added
        out.replaced += len(changed)
        if not added and not changed:
            continue
        gone = None
        if changed:
            left = old_values[changed, : ds.ndim]
            gone = (left.min(axis=0), left.max(axis=0))
        out.contents[g] = Content(pa.concat_arrays([old_eids.filter(pa.array(kept)), new_eids]),
                                  np.concatenate([old_values[kept], new_values]), gone)
    return out
