// Aggregates as people read them, by the rule the CLI's tables follow
// (gridagg/cli_query.py, aggregate_text): a number column's min, max and sum to its scale,
// its avg to AVG_DIGITS more digits without trailing zeros below the scale; counts, times
// and null as the API gives them. The API's JSON keeps full precision. Bounds (an answer
// not exact yet) read as the CLI writes them.

export const AVG_DIGITS = 3;

/** The text of one answer: label ("avg:temperature"), its value, and the column it is
 * over (a dataset description's column, with type and scale; undefined for count). */
export function formatAggregate(label, value, column) {
  if (value === null || value === undefined) return "—";
  const func = label.split(":")[0];
  if (func === "count" || typeof value !== "number" || !column || column.type !== "number") return String(value);
  const scale = column.scale || 0;
  if (func !== "avg") return value.toFixed(scale);
  const [whole, digits = ""] = value.toFixed(scale + AVG_DIGITS).split(".");
  const kept = digits.slice(0, scale) + digits.slice(scale).replace(/0+$/, "");
  const sign = /[1-9]/.test(whole + kept) ? whole : "0"; // rounded to zero: no sign
  return kept ? `${sign}.${kept}` : sign;
}

/** The text of an answer known only within bounds, as the CLI writes it (cli_query.py,
 * bound_text): "lo..hi", each end as formatAggregate writes it (rounding keeps order, so
 * the exact answer as shown lies within), an open end (null) empty, then " or null" when
 * the answer may also be null (no selected row has a value). */
export function formatBounds(label, [lo, hi], maybeNull, column) {
  const end = (v) => (v === null || v === undefined ? "" : formatAggregate(label, v, column));
  return `${end(lo)}..${end(hi)}${maybeNull ? " or null" : ""}`;
}
