// The time-series plot of a /series answer with Observable Plot: the min..max band, the
// avg line with a dot per point (its window in the dot's title), and the rows per point.
// A point not exact yet (an answer streamed as it improves) is drawn as its bounds
// instead, in grey: how far its min..max band may reach (min's lower bound to max's
// upper), darker where it surely reaches (min's upper bound to max's lower), a dashed
// band where its avg lies (its title says all three), and the range its count lies in.
import * as Plot from "@observablehq/plot";
import { formatAggregate, formatBounds } from "./numbers.js";

/** The series of answer (points of count and min/max/avg of col, a column of the dataset)
 * drawn into element; its data-exact says whether every point is exact. */
export function drawSeries(element, answer, col) {
  const { name: column, unit } = col;
  const labels = { min: `min:${column}`, max: `max:${column}`, avg: `avg:${column}` };
  const rows = answer.points.map((p) => {
    const row = { time: new Date(p.time), end: new Date(Date.parse(p.time) + answer.step * 1000),
      from: p.window[0], to: p.window[1], exact: p.exact !== false };
    if (row.exact) {
      return { ...row, count: p.count, min: p.results[labels.min], max: p.results[labels.max], avg: p.results[labels.avg] };
    }
    const bound = (label) => p.bounds[label] || [null, null];
    const text = (func) => `${func} ${formatBounds(labels[func], bound(labels[func]), p.may_be_null.includes(labels[func]), col)}`;
    return { ...row, counts: bound("count"), mins: bound(labels.min), maxs: bound(labels.max), avgs: bound(labels.avg),
      title: `${row.from} .. ${row.to} (not exact yet)\n${text("avg")}, ${text("min")}, ${text("max")}, `
        + `${formatBounds("count", bound("count"), false)} rows` };
  });
  const exact = rows.filter((r) => r.exact);
  const bounded = rows.filter((r) => !r.exact);
  const width = Math.max(320, element.clientWidth || 640);
  // Both plots span the buckets: from the first one's start to the last one's end.
  const span = rows.length ? [rows[0].time, rows[rows.length - 1].end] : undefined;
  const label = unit ? `${column} (${unit})` : column;
  // A band over each bounded point's bucket from lo(r) to hi(r), where both are known and
  // lo < hi (an open side or an empty band: not drawn).
  const band = (lo, hi, options) => Plot.rect(bounded.filter((r) => lo(r) !== null && hi(r) !== null && lo(r) < hi(r)),
    { x1: "time", x2: "end", y1: lo, y2: hi, ...options });
  const values = Plot.plot({
    width, height: 240, marginLeft: 56, marginRight: 20,
    x: { type: "utc", label: null, domain: span },
    y: { label, grid: true },
    marks: [
      Plot.rect(exact, { x1: "time", x2: "end", y1: "min", y2: "max", fill: "#4c6ef5", fillOpacity: 0.18,
        className: "series-band" }),
      band((r) => r.mins[0], (r) => r.maxs[1], { fill: "#868e96", fillOpacity: 0.15, className: "series-bound-range" }),
      band((r) => r.mins[1], (r) => r.maxs[0], { fill: "#868e96", fillOpacity: 0.3, className: "series-bound-core" }),
      band((r) => r.avgs[0], (r) => r.avgs[1], { fill: "#364fc7", fillOpacity: 0.12, stroke: "#364fc7",
        strokeOpacity: 0.7, strokeDasharray: "3 2", title: "title", className: "series-bound-avg" }),
      Plot.lineY(rows, { x: "time", y: (r) => (r.exact ? r.avg : undefined), stroke: "#364fc7",
        className: "series-line" }),
      Plot.dot(exact, { x: "time", y: "avg", r: 2.5, fill: "#364fc7", className: "series-point",
        title: (d) => `${d.from} .. ${d.to}\navg ${formatAggregate("avg", d.avg, col)}, `
          + `min ${formatAggregate("min", d.min, col)}, max ${formatAggregate("max", d.max, col)}, ${d.count} rows` }),
    ],
  });
  const counts = Plot.plot({
    width, height: 90, marginLeft: 56, marginRight: 20,
    x: { type: "utc", label: null, axis: null, domain: span },
    y: { label: "rows in window", grid: true, ticks: 3 },
    marks: [
      Plot.rectY(exact, { x1: "time", x2: "end", y: "count", fill: "#adb5bd", inset: 0.5, className: "series-count" }),
      band((r) => r.counts[0], (r) => r.counts[1], { fill: "#adb5bd", fillOpacity: 0.2, stroke: "#868e96",
        strokeDasharray: "3 2", inset: 0.5, className: "series-count-bound" }),
      Plot.ruleY([0]),
    ],
  });
  element.dataset.exact = String(!bounded.length);
  element.replaceChildren(values, counts);
}
