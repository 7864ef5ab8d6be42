// How dark to fill a leaf's box. Projected leaves overlap (they differ on the other
// dimensions), often on exactly the same box: each box gets a share of the ink by its
// rows, divided among the most leaves that share one box, so stacks stay readable.

/** A function leaf -> fill opacity (0..0.6) for these leaves ({count, box}). */
export function leafFill(leaves) {
  const stacked = new Map();
  for (const leaf of leaves) {
    const key = leaf.box.flat().join();
    stacked.set(key, (stacked.get(key) || 0) + 1);
  }
  const deepest = Math.max(1, ...stacked.values());
  const most = Math.max(0, ...leaves.map((l) => l.count));
  return (leaf) => (most ? (0.6 * leaf.count) / most / Math.sqrt(deepest) : 0);
}
