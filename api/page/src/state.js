// The page's state, kept in the URL's query string so that a view can be shared:
//   ds=weather  box=x0,y0,x1,y1 | poly=x,y;x,y;...  w.<dimension>=lo,hi
//   agg=count,avg:temperature  col=temperature  step=1d  window=7d  view=data|grid
//   grid=x,y (the grid view's two dimensions; default lon/lat, on the map)

/** The empty state (every field present). */
export function emptyState() {
  return { ds: "", box: null, poly: null, ranges: {}, aggs: [], col: "", step: "", window: "", view: "data", grid: null };
}

function numbers(text, sep) {
  const out = text.split(sep).map(Number);
  return out.every(Number.isFinite) ? out : null;
}

/** The state a query string describes (unknown or malformed parts are left out). */
export function parseState(search) {
  const params = new URLSearchParams(search);
  const state = emptyState();
  state.ds = params.get("ds") || "";
  const box = params.get("box") && numbers(params.get("box"), ",");
  if (box && box.length === 4) state.box = box;
  const poly = params.get("poly");
  if (poly) {
    const ring = poly.split(";").map((p) => numbers(p, ","));
    if (ring.length >= 3 && ring.every((p) => p && p.length === 2)) state.poly = ring;
  }
  for (const [key, value] of params) {
    if (!key.startsWith("w.")) continue;
    const [lo = "", hi = ""] = value.split(",");
    state.ranges[key.slice(2)] = [lo.trim(), hi.trim()];
  }
  state.aggs = (params.get("agg") || "").split(",").filter(Boolean);
  state.col = params.get("col") || "";
  state.step = params.get("step") || "";
  state.window = params.get("window") || "";
  state.view = params.get("view") === "grid" ? "grid" : "data";
  const grid = (params.get("grid") || "").split(",");
  if (grid.length === 2 && grid[0] && grid[1]) state.grid = grid;
  return state;
}

/** The query string of a state (commas left readable). */
export function formatState(state) {
  const parts = [];
  const add = (key, value) => {
    if (value) parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(value).replace(/%2C/g, ",")}`);
  };
  add("ds", state.ds);
  if (state.box) add("box", state.box.join(","));
  if (state.poly) parts.push(`poly=${state.poly.map((p) => p.join(",")).join(";")}`);
  for (const [dim, [lo, hi]] of Object.entries(state.ranges)) {
    if (lo || hi) add(`w.${dim}`, `${lo},${hi}`);
  }
  add("agg", state.aggs.join(","));
  add("col", state.col);
  add("step", state.step);
  add("window", state.window);
  if (state.view !== "data") add("view", state.view);
  if (state.grid) add("grid", state.grid.join(","));
  return parts.length ? `?${parts.join("&")}` : "";
}
