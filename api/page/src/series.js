// The time-series plot of a /series answer, drawn as SVG text in one go: the min..max
// band, the avg line with a dot per point (its window in the dot's title), and the rows
// per point. A point not exact yet (an answer streamed as it improves) is drawn as its
// bounds instead, in grey: how far its min..max band may reach (min's lower bound to
// max's upper), darker where it surely reaches (min's upper bound to max's lower), a
// dashed band where its avg lies (its title says all three), and the range its count
// lies in. The page draws a series twice a change or more (bounds, then exact): a
// plotting library's general machinery made each drawing several times slower than
// setting this text, holding up the answer table's frame too.
import { scaleLinear, scaleUtc } from "d3-scale";
import { formatAggregate, formatBounds } from "./numbers.js";

const VALUES = { height: 240, top: 20, bottom: 30 };
const COUNTS = { height: 100, top: 20, bottom: 6 };
const LEFT = 56;
const RIGHT = 20;
const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" };
const escape = (text) => String(text).replace(/[&<>"]/g, (c) => ESCAPES[c]);
const px = (v) => Math.round(v * 10) / 10;

/** The series of answer (points of count and min/max/avg of col, a column of the dataset)
 * drawn into element; its data-exact says whether every point is exact. */
export function drawSeries(element, answer, col) {
  const { name: column, unit } = col;
  const labels = { min: `min:${column}`, max: `max:${column}`, avg: `avg:${column}` };
  const rows = answer.points.map((p) => {
    const start = Date.parse(p.time);
    const row = { start, end: start + answer.step * 1000, from: p.window[0], to: p.window[1], exact: p.exact !== false };
    if (row.exact) {
      return { ...row, count: p.count, min: p.results[labels.min], max: p.results[labels.max], avg: p.results[labels.avg] };
    }
    const bound = (label) => p.bounds[label] || [null, null];
    const text = (func) => `${func} ${formatBounds(labels[func], bound(labels[func]), p.may_be_null.includes(labels[func]), col)}`;
    return { ...row, counts: bound("count"), mins: bound(labels.min), maxs: bound(labels.max), avgs: bound(labels.avg),
      title: () => `${row.from} .. ${row.to} (not exact yet)\n${text("avg")}, ${text("min")}, ${text("max")}, `
        + `${formatBounds("count", bound("count"), false)} rows` };
  });
  const exact = rows.filter((r) => r.exact);
  const bounded = rows.filter((r) => !r.exact);
  const width = Math.max(320, element.clientWidth || 640);
  // Both plots span the buckets: from the first one's start to the last one's end.
  const x = scaleUtc().range([LEFT, width - RIGHT]);
  if (rows.length) x.domain([rows[0].start, rows[rows.length - 1].end]);
  const known = (v) => v !== null && v !== undefined;
  const values = [...exact.flatMap((r) => [r.min, r.max, r.avg]), ...bounded.flatMap((r) => [...r.mins, ...r.maxs, ...r.avgs])]
    .filter(known);
  const y = scaleLinear().range([VALUES.height - VALUES.bottom, VALUES.top]);
  if (values.length) y.domain([Math.min(...values), Math.max(...values)]).nice();
  const counts = [...exact.map((r) => r.count), ...bounded.map((r) => r.counts[1])].filter(known);
  const yc = scaleLinear().domain([0, Math.max(1, ...counts)]).nice().range([COUNTS.height - COUNTS.bottom, COUNTS.top]);

  // Rectangles over each row's bucket from lo(r) to hi(r) on scale s, where both are known
  // and lo < hi (an open side or an empty band: not drawn); title(r): its tooltip.
  const rects = (list, s, lo, hi, title) => list.filter((r) => known(lo(r)) && known(hi(r)) && lo(r) < hi(r))
    .map((r) => `<rect x="${px(x(r.start))}" width="${px(x(r.end) - x(r.start))}" y="${px(s(hi(r)))}" `
      + `height="${px(s(lo(r)) - s(hi(r)))}">${title ? `<title>${escape(title(r))}</title>` : ""}</rect>`).join("");
  let line = "";
  let open = false;
  for (const r of rows) {
    const on = r.exact && known(r.avg);
    if (on) line += `${open ? "L" : "M"}${px(x((r.start + r.end) / 2))},${px(y(r.avg))}`;
    open = on;
  }
  const dots = exact.filter((r) => known(r.avg)).map((r) => `<circle cx="${px(x((r.start + r.end) / 2))}" `
    + `cy="${px(y(r.avg))}" r="2.5"><title>${escape(`${r.from} .. ${r.to}\navg ${formatAggregate("avg", r.avg, col)}, `
    + `min ${formatAggregate("min", r.min, col)}, max ${formatAggregate("max", r.max, col)}, ${r.count} rows`)}</title></circle>`)
    .join("");
  const countBars = exact.map((r) => `<rect x="${px(x(r.start) + 0.5)}" width="${px(Math.max(0, x(r.end) - x(r.start) - 1))}" `
    + `y="${px(yc(r.count))}" height="${px(yc(0) - yc(r.count))}"></rect>`).join("");

  const label = unit ? `${column} (${unit})` : column;
  const valuesSvg = svg(width, VALUES.height, [
    yAxis(y, width, VALUES, label, 6),
    xAxis(x, VALUES.height - VALUES.bottom, width),
    `<g class="series-band" fill="#4c6ef5" fill-opacity="0.18">${rects(exact, y, (r) => r.min, (r) => r.max)}</g>`,
    `<g class="series-bound-range" fill="#868e96" fill-opacity="0.15">${rects(bounded, y, (r) => r.mins[0], (r) => r.maxs[1])}</g>`,
    `<g class="series-bound-core" fill="#868e96" fill-opacity="0.3">${rects(bounded, y, (r) => r.mins[1], (r) => r.maxs[0])}</g>`,
    `<g class="series-bound-avg" fill="#364fc7" fill-opacity="0.12" stroke="#364fc7" stroke-opacity="0.7" `
      + `stroke-dasharray="3 2">${rects(bounded, y, (r) => r.avgs[0], (r) => r.avgs[1], (r) => r.title())}</g>`,
    `<path class="series-line" fill="none" stroke="#364fc7" stroke-width="1.5" d="${line}"></path>`,
    `<g class="series-point" fill="#364fc7">${dots}</g>`,
  ]);
  const countsSvg = svg(width, COUNTS.height, [
    yAxis(yc, width, COUNTS, "rows in window", 3),
    `<g class="series-count" fill="#adb5bd">${countBars}</g>`,
    `<g class="series-count-bound" fill="#adb5bd" fill-opacity="0.2" stroke="#868e96" stroke-dasharray="3 2">`
      + `${rects(bounded, yc, (r) => r.counts[0], (r) => r.counts[1])}</g>`,
    `<line x1="${LEFT}" x2="${width - RIGHT}" y1="${px(yc(0))}" y2="${px(yc(0))}" stroke="currentColor"></line>`,
  ]);
  element.dataset.exact = String(!bounded.length);
  element.innerHTML = valuesSvg + countsSvg;
}

function svg(width, height, parts) {
  return `<svg class="series-plot" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" `
    + `font-size="10" font-family="system-ui, sans-serif">${parts.join("")}</svg>`;
}

/** The y axis of scale s on the left, its grid lines across, and its label above. */
function yAxis(s, width, box, label, count) {
  const ticks = s.ticks(count);
  const format = s.tickFormat(count);
  const lines = ticks.map((t) => `<line x1="${LEFT}" x2="${width - RIGHT}" y1="${px(s(t))}" y2="${px(s(t))}"></line>`);
  const texts = ticks.map((t) => `<text x="${LEFT - 6}" y="${px(s(t))}" dy="0.32em">${escape(format(t))}</text>`);
  return `<g class="series-grid" stroke="currentColor" stroke-opacity="0.1">${lines.join("")}</g>`
    + `<g class="series-y-axis" text-anchor="end" fill="currentColor">${texts.join("")}`
    + `<text x="${LEFT - 6}" y="${box.top - 8}" text-anchor="start" dx="-${LEFT - 12}">↑ ${escape(label)}</text></g>`;
}

/** The time axis of scale s along y0: ticks and their dates. */
function xAxis(s, y0, width) {
  const count = Math.max(2, Math.floor(width / 90));
  const format = s.tickFormat(count);
  const ticks = s.ticks(count).map((t) => `<line x1="${px(s(t))}" x2="${px(s(t))}" y1="${y0}" y2="${y0 + 6}" `
    + `stroke="currentColor"></line><text x="${px(s(t))}" y="${y0 + 9}" dy="0.71em">${escape(format(t))}</text>`);
  return `<g class="series-x-axis" text-anchor="middle" fill="currentColor">${ticks.join("")}</g>`;
}
