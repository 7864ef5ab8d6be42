// How dark to fill a leaf's box. Projected leaves overlap (they differ on the other
// dimensions), so fills add up where boxes stack: each leaf gets ink in proportion to
// its rows, scaled so that the most rows stacked over one point (found at the leaves'
// centres, a few thousand of them at most) reach the darkest fill.

const DARKEST = 0.7;
const MAX_PROBES = 3000;

const coordinate = (v) => (typeof v === "string" ? Date.parse(v) : v);

/** A function leaf -> fill opacity (0..DARKEST) for these leaves ({count, box}). */
export function leafFill(leaves) {
  const boxes = leaves.map((l) => l.box.map(([lo, hi]) => [coordinate(lo), coordinate(hi)]));
  const every = Math.max(1, Math.ceil(leaves.length / MAX_PROBES));
  let deepest = 0;
  for (let i = 0; i < boxes.length; i += every) {
    const [[x0, x1], [y0, y1]] = boxes[i];
    const cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
    let rows = 0;
    for (let j = 0; j < boxes.length; j++) {
      const [[a0, a1], [b0, b1]] = boxes[j];
      if (a0 <= cx && cx <= a1 && b0 <= cy && cy <= b1) rows += leaves[j].count;
    }
    deepest = Math.max(deepest, rows);
  }
  const fills = new Map(leaves.map((l) => [l, deepest ? (DARKEST * l.count) / deepest : 0]));
  return (leaf) => fills.get(leaf);
}
