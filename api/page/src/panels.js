// The answer and plan tables. Answers are shown to their columns' scale (numbers.js), an
// answer not exact yet as its bounds (lo..hi), plan values as the API gives them; each
// cell names what it shows (data-agg, data-plan) so that a test can read it back.
import { formatAggregate, formatBounds } from "./numbers.js";

function cell(tag, text, attrs = {}) {
  const el = document.createElement(tag);
  el.textContent = text;
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

function row(...cells) {
  const tr = document.createElement("tr");
  tr.append(...cells);
  return tr;
}

/** The text of one plan value: numbers and text as given, null as a dash. */
function formatValue(value) {
  return value === null || value === undefined ? "—" : String(value);
}

const PERCENT = (v) => (v === null || v === undefined ? "—" : `${(v * 100).toFixed(1)} %`);

/** answer: a /query answer, exact or (with "exact": false) bounded; columns: {name: column
 * of the dataset}; over: whether no better answer will follow. An answer not exact shows
 * each aggregate's bounds (class "bounded") under a caption saying so; the table's
 * data-exact says which it shows. */
export function showResults(table, answer, columns, over = true) {
  const exact = answer.exact !== false;
  const rows = Object.entries(answer.results).map(([label, value]) => {
    const column = label.includes(":") ? columns[label.split(":")[1]] : undefined;
    const text = exact ? formatAggregate(label, value, column)
      : formatBounds(label, answer.bounds[label], answer.may_be_null.includes(label), column);
    const unit = (exact && value === null) || label.startsWith("count") ? "" : (column && column.unit) || "";
    return row(cell("th", label), cell("td", text, { "data-agg": label, ...(exact ? {} : { class: "bounded" }) }),
      cell("td", unit, { class: "unit" }));
  });
  table.dataset.exact = String(exact);
  if (exact) return table.replaceChildren(...rows);
  const read = `${PERCENT(answer.read_share)} of the cut grids' rows read`;
  const caption = cell("caption", over ? `not exact: the server stopped with ${read}; the exact answers lie within`
    : `not exact yet: bounds, ${read}`);
  table.replaceChildren(caption, ...rows);
}

/** Empty the answer table (a run that got no answer). */
export function clearResults(table) {
  table.replaceChildren();
  delete table.dataset.exact;
}

// [label, how to show it from an answer's plan (and the answer), the plan keys it shows]
const PLAN_ROWS = [
  ["total grids", (p) => p.total_grids, "total_grids"],
  ["grids reused (before → after folding)", (p) => `${p.reused_grids_before} → ${p.reused_grids_after}`,
    "reused_grids_after"],
  ["rows in reused grids", (p) => p.rows_in_reused_grids, "rows_in_reused_grids"],
  ["grids scanned (before → after skipping)", (p) => `${p.scanned_grids_before} → ${p.scanned_grids_after}`,
    "scanned_grids_after"],
  ["rows scanned", (p) => p.rows_in_scanned_grids, "rows_in_scanned_grids"],
  ["rows matched by scans", (p) => p.rows_matched_by_scans, "rows_matched_by_scans"],
  ["reuse rate", (p) => PERCENT(p.reuse_rate), "reuse_rate"],
  ["skip rate", (p) => PERCENT(p.skip_rate), "skip_rate"],
  ["grids exact / bounded", (p) => (p.bounds ? `${p.bounds.exact_grids} / ${p.bounds.bounded_grids}` : null),
    "bounds"],
  ["cut grids' rows read", (p, a) => (a.read_share === undefined || !p.bounds ? PERCENT(a.read_share)
    : `${p.bounds.rows_read} of ${p.bounds.rows_read + p.bounds.rows_bounded} (${PERCENT(a.read_share)})`),
    "read_share"],
  ["round trips", (p) => Object.entries(p.round_trips || {}).map(([k, v]) => `${k} ${v}`).join(", "),
    "round_trips"],
  ["server time", (p) => `${p.elapsed_ms} ms`, "elapsed_ms"],
];

/** The plans of the last query and series side by side, from their {answer, ms, first}
 * (either may be null; first: the ms of a streamed answer's first), with the time each
 * request took as the page saw it: to its first answer and to its last. */
export function showPlans(table, query, series) {
  const head = row(cell("th", ""), cell("th", "query"), cell("th", "series"));
  const body = PLAN_ROWS.map(([label, show, key]) => row(
    cell("th", label),
    cell("td", query ? formatValue(show(query.answer.plan, query.answer)) : "", { "data-plan": key }),
    cell("td", series ? formatValue(show(series.answer.plan, series.answer)) : "", { "data-series-plan": key }),
  ));
  const trip = (x) => {
    if (!x) return "";
    const first = x.first ?? x.ms;
    return x.ms - first >= 1 ? `${first.toFixed(0)} → ${x.ms.toFixed(0)} ms` : `${x.ms.toFixed(0)} ms`;
  };
  body.push(row(cell("th", "round trip (page): first → last answer"), cell("td", trip(query)), cell("td", trip(series))));
  table.replaceChildren(head, ...body);
}
