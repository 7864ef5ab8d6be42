// The time-series plot of a /series answer with Observable Plot: the min..max band, the
// avg line with a dot per point (its window in the dot's title), and the rows per point.
import * as Plot from "@observablehq/plot";
import { formatAggregate } from "./numbers.js";

/** The series of answer (points of min/max/avg of column, a column of the dataset) drawn
 * into element. */
export function drawSeries(element, answer, col) {
  const { name: column, unit } = col;
  const rows = answer.points.map((p) => ({
    time: new Date(p.time),
    from: p.window[0],
    to: p.window[1],
    count: p.count,
    min: p.results[`min:${column}`],
    max: p.results[`max:${column}`],
    avg: p.results[`avg:${column}`],
  }));
  const width = Math.max(320, element.clientWidth || 640);
  // Both plots span the buckets: from the first one's start to the last one's end.
  const span = rows.length ? [rows[0].time, new Date(+rows[rows.length - 1].time + answer.step * 1000)] : undefined;
  const label = unit ? `${column} (${unit})` : column;
  const values = Plot.plot({
    width, height: 240, marginLeft: 56, marginRight: 20,
    x: { type: "utc", label: null, domain: span },
    y: { label, grid: true },
    marks: [
      Plot.areaY(rows, { x: "time", y1: "min", y2: "max", fill: "#4c6ef5", fillOpacity: 0.18, curve: "step-after",
        className: "series-band" }),
      Plot.lineY(rows, { x: "time", y: "avg", stroke: "#364fc7", className: "series-line" }),
      Plot.dot(rows, { x: "time", y: "avg", r: 2.5, fill: "#364fc7", className: "series-point",
        title: (d) => `${d.from} .. ${d.to}\navg ${formatAggregate("avg", d.avg, col)}, `
          + `min ${formatAggregate("min", d.min, col)}, max ${formatAggregate("max", d.max, col)}, ${d.count} rows` }),
    ],
  });
  const counts = Plot.plot({
    width, height: 90, marginLeft: 56, marginRight: 20,
    x: { type: "utc", label: null, axis: null, domain: span },
    y: { label: "rows in window", grid: true, ticks: 3 },
    marks: [Plot.rectY(rows, { x1: "time", x2: (d) => new Date(+d.time + answer.step * 1000), y: "count",
      fill: "#adb5bd", inset: 0.5, className: "series-count" }), Plot.ruleY([0])],
  });
  element.replaceChildren(values, counts);
}
