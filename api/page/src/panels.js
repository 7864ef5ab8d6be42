// The answer and plan tables. Answers are shown to their columns' scale (numbers.js), plan
// values as the API gives them; each cell names what it shows (data-agg, data-plan) so
// that a test can read it back.
import { formatAggregate } from "./numbers.js";

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

/** results: {label: value} of a /query answer; columns: {name: column of the dataset}. */
export function showResults(table, results, columns) {
  const rows = Object.entries(results).map(([label, value]) => {
    const column = label.includes(":") ? columns[label.split(":")[1]] : undefined;
    return row(cell("th", label), cell("td", formatAggregate(label, value, column), { "data-agg": label }),
      cell("td", value === null || label.startsWith("count") ? "" : (column && column.unit) || "", { class: "unit" }));
  });
  table.replaceChildren(...rows);
}

const PERCENT = (v) => (v === null || v === undefined ? "—" : `${(v * 100).toFixed(1)} %`);

// [label, how to show it from a plan, the plan keys it shows]
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
  ["round trips", (p) => Object.entries(p.round_trips || {}).map(([k, v]) => `${k} ${v}`).join(", "),
    "round_trips"],
  ["server time", (p) => `${p.elapsed_ms} ms`, "elapsed_ms"],
];

/** The plans of the last query and series side by side, from their {answer, ms} (either
 * may be null), with the time each request took as the page saw it. */
export function showPlans(table, query, series) {
  const head = row(cell("th", ""), cell("th", "query"), cell("th", "series"));
  const body = PLAN_ROWS.map(([label, show, key]) => row(
    cell("th", label),
    cell("td", query ? formatValue(show(query.answer.plan)) : "", { "data-plan": key }),
    cell("td", series ? formatValue(show(series.answer.plan)) : "", { "data-series-plan": key }),
  ));
  const trip = (x) => (x ? `${x.ms.toFixed(0)} ms` : "");
  body.push(row(cell("th", "round trip (page)"), cell("td", trip(query)), cell("td", trip(series))));
  table.replaceChildren(head, ...body);
}
