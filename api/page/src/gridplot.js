// The grid projected onto two dimensions other than lon/lat, in a plain frame drawn by
// Observable Plot: each leaf a rectangle (class "leaf", plus "reused"/"scanned" when
// the last query did that to it), shaded like the map's (shade.js), zoomed to the data.
import * as Plot from "@observablehq/plot";
import { leafFill } from "./shade.js";

const value = (v, time) => (time ? new Date(v) : v);

/** Draw leaves ({id, count, box: [[x0, x1], [y0, y1]]}) into element; axes: the two
 * dimensions' descriptions; extents: each one's data [min, max]; ranges: the query's
 * [lo, hi] on each (null: unbounded), outlined; markOf(leaf) gives "", "reused" or
 * "scanned". */
export function drawGridPlot(element, leaves, axes, extents, ranges, markOf) {
  const [ax, ay] = axes.map((a) => a.type === "time");
  const fill = leafFill(leaves);
  const data = leaves.map((l) => ({
    x1: value(l.box[0][0], ax), x2: value(l.box[0][1], ax),
    y1: value(l.box[1][0], ay), y2: value(l.box[1][1], ay),
    fill: fill(l), mark: markOf(l), title: `grid ${l.id}: ${l.count.toLocaleString()} rows`,
  }));
  const label = (a) => (a.unit ? `${a.name} (${a.unit})` : a.name);
  const domain = ([lo, hi], time) => (lo === null ? undefined : [value(lo, time), value(hi, time)]);
  const rect = (mark, stroke, width) => Plot.rect(data.filter((d) => d.mark === mark), {
    x1: "x1", x2: "x2", y1: "y1", y2: "y2", fill: "#6741d9", fillOpacity: "fill", clip: true,
    stroke, strokeWidth: width, strokeOpacity: 0.8, title: "title", className: `leaf ${mark}`.trim(),
  });
  element.replaceChildren(Plot.plot({
    width: Math.max(320, element.clientWidth || 640), height: 420, marginLeft: 60,
    x: { type: ax ? "utc" : "linear", label: label(axes[0]), domain: domain(extents[0], ax), nice: true },
    y: { type: ay ? "utc" : "linear", label: label(axes[1]), domain: domain(extents[1], ay), nice: true },
    marks: [rect("", "#5f3dc4", 0.7), rect("reused", "#2b8a3e", 2), rect("scanned", "#d9480f", 2),
      Plot.rect([ranges], { // the query's ranges (an open side: the data's end)
        x1: (r) => value(r[0][0] ?? extents[0][0], ax), x2: (r) => value(r[0][1] ?? extents[0][1], ax),
        y1: (r) => value(r[1][0] ?? extents[1][0], ay), y2: (r) => value(r[1][1] ?? extents[1][1], ay),
        fill: "none", stroke: "#d33", strokeWidth: 2, strokeDasharray: "4 3", clip: true,
        className: "selection",
      })],
  }));
}
