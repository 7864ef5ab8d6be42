// The dashboard page: pick a dataset, draw a selection, set ranges and aggregates; the
// page asks the API for the answer, the series and the leaves, and keeps its state in
// the URL. The answer and the series come as they improve: the tree's bounds at once,
// drawn as bands, then the exact values.
import "./page.css";
import { ApiError, call, readToken, setReadToken, stream } from "./api.js";
import { drawGridPlot } from "./gridplot.js";
import { createMap } from "./map.js";
import { clearResults, showPlans, showResults } from "./panels.js";
import { drawSeries } from "./series.js";
import { emptyState, formatState, parseState } from "./state.js";

const $ = (id) => document.getElementById(id);
const FUNCS = ["min", "max", "sum", "avg"];
const STEPS = [["1h", 3600], ["6h", 21600], ["1d", 86400], ["7d", 604800], ["30d", 2592000],
  ["90d", 7776000], ["360d", 31104000]];
const MAX_AUTO_POINTS = 400;

let state = parseState(location.search);
let datasets = [];
let ds = null; // the chosen dataset's description, with .extent (data min/max per dimension)
let mapView = null;
let mapFitted = false; // the map is fitted to the data once it is shown
let explainKnown = true; // until the server says it has no "explain" key
let running = null;
let busy = 0;

// ---------------------------------------------------------------- progress and messages

function setBusy(delta) {
  busy += delta;
  $("busy").hidden = busy === 0;
  document.body.setAttribute("aria-busy", busy > 0 ? "true" : "false");
  if (busy > 0) $("status").textContent = "running…";
}

/** promise, with the busy indicator on until it settles. */
async function busyWhile(promise) {
  setBusy(1);
  try {
    return await promise;
  } finally {
    setBusy(-1);
  }
}

/** call() (or with onAnswer, stream()) with the busy indicator on until it is over. */
function request(path, body, signal, onAnswer) {
  return busyWhile(onAnswer ? stream(path, body, signal, onAnswer) : call(path, body, signal));
}

function showMessages(lines) {
  $("message").hidden = lines.length === 0;
  $("message").replaceChildren(...lines.map((line) => {
    const p = document.createElement("p");
    p.textContent = line;
    return p;
  }));
}

function failed(what, err) {
  if (err instanceof ApiError && err.status === 401) $("token-form").hidden = false;
  return `${what}: ${err instanceof ApiError ? err.describe() : err.message}`;
}

// ---------------------------------------------------------------- the dataset's controls

const dsPath = () => `/v1/datasets/${encodeURIComponent(ds.name)}`;
const columns = () => [...ds.dimensions, ...ds.measures];
const lonlat = () => ds.region_dimensions; // [lon, lat] names, or null: then no map
const rangeDims = () => ds.dimensions.filter((d) => !(lonlat() || []).includes(d.name));
// The grid view's two dimensions: lon/lat (drawn on the map) unless the URL names others.
const gridAxes = () => state.grid || lonlat() || ds.dimensions.slice(0, 2).map((d) => d.name);
const gridOnMap = () => lonlat() !== null && gridAxes().join() === lonlat().join();

function scaleOf(name) {
  const col = columns().find((c) => c.name === name);
  return col && col.type === "number" ? col.scale || 0 : 0;
}

function buildControls() {
  const body = $("ranges").tBodies[0];
  body.replaceChildren(...rangeDims().map((d) => {
    const tr = document.createElement("tr");
    const [lo, hi] = state.ranges[d.name] || ["", ""];
    const [min, max] = ds.extent[d.name] || ["", ""];
    tr.innerHTML = `<th></th><td><input size="12"></td><td><input size="12"></td>`;
    tr.cells[0].textContent = d.unit ? `${d.name} (${d.unit})` : d.name;
    [[tr.cells[1], lo, min], [tr.cells[2], hi, max]].forEach(([td, value, hint], i) => {
      const input = td.firstChild;
      Object.assign(input, { value, placeholder: hint ?? "", name: `${d.name}.${i ? "hi" : "lo"}` });
      input.dataset.dim = d.name;
      input.addEventListener("change", run);
    });
    return tr;
  }));

  const aggs = $("aggregates");
  const head = document.createElement("tr");
  head.innerHTML = "<th></th>" + FUNCS.map((f) => `<th>${f}</th>`).join("");
  const countRow = document.createElement("tr");
  countRow.innerHTML = `<th>count</th><td colspan="4"><input type="checkbox" value="count"></td>`;
  const colRows = columns().map((c) => {
    const tr = document.createElement("tr");
    tr.innerHTML = "<th></th>" + FUNCS.map((f) => `<td><input type="checkbox" value="${f}:${c.name}"></td>`).join("");
    tr.cells[0].textContent = c.name;
    return tr;
  });
  aggs.replaceChildren(head, countRow, ...colRows);
  for (const box of aggs.querySelectorAll("input")) {
    box.checked = state.aggs.includes(box.value);
    box.addEventListener("change", run);
  }

  const numeric = columns().filter((c) => c.name !== ds.time_dimension);
  $("series-column").replaceChildren(...numeric.map((c) => new Option(c.name, c.name)));
  $("series-column").value = state.col;
  $("step").value = state.step;
  $("window").value = state.window;
}

function readControls() {
  state.ranges = {};
  for (const input of $("ranges").querySelectorAll("input")) {
    const pair = state.ranges[input.dataset.dim] || ["", ""];
    pair[input.name.endsWith(".hi") ? 1 : 0] = input.value.trim();
    state.ranges[input.dataset.dim] = pair;
  }
  state.aggs = [...$("aggregates").querySelectorAll("input:checked")].map((b) => b.value);
  state.col = $("series-column").value;
  state.step = $("step").value.trim();
  state.window = $("window").value.trim();
}

function defaults() {
  const first = ds.measures[0] || ds.dimensions.find((d) => d.name !== ds.time_dimension) || ds.dimensions[0];
  if (!state.aggs.length) state.aggs = ["count", `min:${first.name}`, `max:${first.name}`, `avg:${first.name}`];
  if (!state.col) state.col = first.name;
}

// ---------------------------------------------------------------- requests

/** where (ranges and the drawn box) and region (the drawn polygon) of the state. */
function selection() {
  const where = {};
  for (const [dim, [lo, hi]] of Object.entries(state.ranges)) {
    if (lo || hi) where[dim] = [lo || null, hi || null];
  }
  const out = { where };
  const axes = lonlat();
  if (axes && state.box) {
    const [x0, y0, x1, y1] = state.box;
    where[axes[0]] = [x0, x1];
    where[axes[1]] = [y0, y1];
  } else if (axes && state.poly) {
    out.region = { type: "Polygon", coordinates: [[...state.poly, state.poly[0]]] };
  }
  return out;
}

/** The query's answer, with the grids it used when the server lists them; onAnswer: as
 * stream()'s (undefined: the exact answer alone). */
async function query(body, signal, onAnswer) {
  if (explainKnown) {
    try {
      return await request(`${dsPath()}/query`, { ...body, explain: true }, signal, onAnswer);
    } catch (err) {
      // A server without grid IDs in its plans refuses the key: ask again without it.
      if (!(err instanceof ApiError && err.status === 400 && err.field === "explain")) throw err;
      explainKnown = false;
    }
  }
  return request(`${dsPath()}/query`, body, signal, onAnswer);
}

/** The series request of the state: the chosen step (or the smallest that gives at most
 * MAX_AUTO_POINTS points), over the time range (or the data's time span). */
function seriesBody(sel) {
  const t = ds.time_dimension;
  const [lo, hi] = state.ranges[t] || ["", ""];
  const start = lo || ds.extent[t][0];
  const end = hi || ds.extent[t][1];
  let step = state.step;
  if (!step) {
    const span = (Date.parse(end) - Date.parse(start)) / 1000;
    const fit = STEPS.find(([, secs]) => span / secs <= MAX_AUTO_POINTS) || STEPS[STEPS.length - 1];
    step = fit[0];
  }
  const c = state.col;
  // count too: a point not exact yet then has bounds on its rows as well.
  const body = { ...sel, aggregates: ["count", `min:${c}`, `max:${c}`, `avg:${c}`], step, start, end };
  if (state.window) body.window = state.window;
  return body;
}

function gridMarks(plan) {
  const grids = plan && plan.grids;
  if (!grids) return null;
  return { reused: new Set(grids.reused), scanned: new Set(grids.scanned), truncated: grids.truncated };
}

// ---------------------------------------------------------------- one run

/** Resolves once the frame after this moment is painted. */
const painted = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve)));

let mapLeaves = []; // projected onto lon/lat: the data view and the grid on the map
let plotLeaves = []; // projected onto the grid view's other dimensions, when it has them

/** Ask for the state's answer, series and leaves, and draw each as it comes: an answer
 * or series as soon as its first (bounded) version arrives, replaced as better ones do;
 * the leaves, asked once both first answers are on screen (a server answers a few
 * requests at once, and drawing a thousand leaves holds up the next frame: the answers
 * go first), with the grid marks of the query's. A run started
 * meanwhile aborts this one. No deadline is sent: the page wants the exact values, and a
 * stream without one ends exact (or at the server's time limit, with bounds). */
async function run() {
  if (!ds) return;
  readControls();
  history.replaceState(null, "", formatState(state) || location.pathname);
  if (running) running.abort();
  const controller = new AbortController();
  running = controller;
  const { signal } = controller;
  const sel = selection();
  const seriesReq = ds.time_dimension && state.col ? seriesBody(sel) : null;
  const byName = Object.fromEntries(columns().map((c) => [c.name, c]));
  let q = null; // the newest {answer, ms, first} of the query and of the series
  let s = null;
  const latest = (before, got) => ({ ...got, first: before ? before.first : got.ms });
  let queried, seriesQueried; // each resolves at its first answer, or its failure
  const firstAnswers = [new Promise((resolve) => { queried = resolve; }),
    new Promise((resolve) => { seriesQueried = resolve; })];
  const onQuery = (got) => {
    if (signal.aborted) return;
    q = latest(q, got);
    showResults($("results"), got.answer, byName, false);
    showPlans($("plan"), q, s);
    queried();
  };
  const onSeries = (got) => {
    if (signal.aborted) return;
    s = latest(s, got);
    drawSeries($("series"), got.answer, byName[state.col]);
    showSeriesNote(got.answer, seriesReq.step, false);
    showPlans($("plan"), q, s);
    seriesQueried();
  };
  const asked = query({ ...sel, aggregates: state.aggs }, signal, onQuery);
  const seriesAsked = seriesReq ? request(`${dsPath()}/series`, seriesReq, signal, onSeries) : Promise.resolve(null);
  asked.then(queried, queried);
  seriesAsked.then(seriesQueried, seriesQueried);
  // Leaves in view: those the selection touches on every dimension but the two drawn.
  const leavesOn = (axes) => request(`${dsPath()}/leaves`, {
    axes, where: Object.fromEntries(Object.entries(sel.where).filter(([k]) => !axes.includes(k))) }, signal);
  const leaves = Promise.all(firstAnswers).then(() => busyWhile(painted())).then(() => Promise.allSettled([
    lonlat() ? leavesOn(lonlat()) : Promise.resolve(null),
    gridOnMap() ? Promise.resolve(null) : leavesOn(gridAxes()),
  ])).then((settled) => {
    if (signal.aborted) return settled;
    const [l, g] = settled.map((x) => (x.status === "fulfilled" && x.value ? x.value.answer.grids : null));
    if (l) mapLeaves = l;
    if (g) plotLeaves = g;
    drawLeaves(q ? gridMarks(q.answer.plan) : null);
    return settled;
  });
  const [qs, ss] = await Promise.allSettled([asked, seriesAsked]);
  const leafCalls = await leaves;
  if (signal.aborted) return;
  const messages = [];
  // No better answer follows: what is shown last says so when it is not exact. A request
  // that failed before its first answer leaves nothing of an earlier run on show.
  if (q) showResults($("results"), q.answer, byName);
  else clearResults($("results"));
  if (qs.status === "rejected") messages.push(failed("query", qs.reason));
  if (s) showSeriesNote(s.answer, seriesReq.step);
  else clearSeries();
  if (ss.status === "rejected") messages.push(failed("series", ss.reason));
  for (const settled of leafCalls) {
    if (settled.status === "rejected") messages.push(failed("leaves", settled.reason));
  }
  showPlans($("plan"), q, s);
  showMessages(messages);
  $("status").textContent = messages.length ? "failed" : "";
  running = null;
}

function clearSeries() {
  const plot = $("series");
  plot.replaceChildren();
  delete plot.dataset.exact;
  $("series-note").textContent = "";
}

/** The line over the series: its points and steps, and while it is not exact (over:
 * whether no better answer will follow) how many points are bounds. */
function showSeriesNote(answer, stepText, over = true) {
  const { step, window, points } = answer;
  let note = `${points.length} points, step ${stepText} (${step} s), window ${window / step} step(s)`;
  if (answer.exact === false) {
    const bounded = points.filter((p) => p.exact === false).length;
    const read = `${(answer.read_share * 100).toFixed(1)} % of the cut grids' rows read`;
    note += over ? `; not exact: the server stopped with ${read}, ${bounded} points drawn as their bounds`
      : `; not exact yet: ${bounded} points drawn as their bounds, ${read}`;
  }
  $("series-note").textContent = note;
}

/** How the last query treated a leaf: "reused" (it or an ancestor is listed),
 * "scanned" or "" (also when the server lists no grid IDs). */
function markerOf(marks) {
  if (!marks) return () => "";
  return (leaf) => (marks.scanned.has(leaf.id) ? "scanned"
    : [...leaf.id].some((_, i) => marks.reused.has(leaf.id.slice(0, i + 1))) ? "reused" : "");
}

let leafMarks = null; // the grid marks of the last query, for a view drawn later

/** Draw the leaves in the view on show (the other is drawn when it is chosen: drawing the
 * data and grid of every leaf of a large dataset held up the next change's answers), with the query's grid marks, and say in the legend what is in view. */
function drawLeaves(marks) {
  leafMarks = marks;
  const markOf = markerOf(marks);
  const onMap = gridOnMap();
  const grid = state.view === "grid";
  if (mapView) {
    if (grid) mapView.showGrid(onMap ? mapLeaves : [], markOf);
    else mapView.showData(mapLeaves);
  }
  const shown = onMap ? mapLeaves : plotLeaves;
  if (!onMap && grid) {
    const axes = gridAxes().map((n) => columns().find((c) => c.name === n));
    const where = selection().where;
    const ranges = axes.map((a) => where[a.name] || [null, null]);
    drawGridPlot($("grid-plot"), plotLeaves, axes, axes.map((a) => ds.extent[a.name]), ranges, markOf);
  }
  const tally = { reused: 0, scanned: 0, "": 0 };
  for (const leaf of shown) tally[markOf(leaf)] += 1;
  const legend = $("legend");
  legend.dataset.leaves = String(shown.length);
  legend.textContent = `${shown.length} lea${shown.length === 1 ? "f" : "ves"} in view; ` + (marks
    ? `last query reused ${tally.reused}, scanned ${tally.scanned}${marks.truncated ? " (lists truncated)" : ""}`
    : "the server lists no grid IDs: no marks");
}

/** Show the map or the plain frame, as the view and the grid's dimensions want. */
function showFrames() {
  const plot = state.view === "grid" && !gridOnMap();
  $("map").hidden = plot || !lonlat();
  $("grid-plot").hidden = !plot;
  $("grid-axes").hidden = state.view !== "grid";
  if (mapView && !$("map").hidden) {
    mapView.map.invalidateSize();
    if (!mapFitted) { // fitted once it has a size
      const [x, y] = lonlat();
      mapView.fit(ds.extent[x][0] === null ? null : [ds.extent[x], ds.extent[y]]);
      mapFitted = true;
    }
  }
}

/** The grid view's dimensions, as picked (lon/lat again: back to the map). */
function chooseGridAxes() {
  const axes = [$("grid-x").value, $("grid-y").value];
  state.grid = lonlat() && axes.join() === lonlat().join() ? null : axes;
  showFrames();
  run();
}

// ---------------------------------------------------------------- datasets

async function chooseDataset(name) {
  ds = datasets.find((d) => d.name === name) || datasets[0];
  if (!ds) return showMessages(["no datasets: load one first (README: gridagg ingest)"]);
  if (state.ds !== ds.name) state = { ...emptyState(), ds: ds.name, view: state.view };
  if (state.grid && !state.grid.every((n) => ds.dimensions.some((d) => d.name === n))) state.grid = null;
  $("dataset").value = ds.name;
  const aggs = ["count", ...ds.dimensions.flatMap((d) => [`min:${d.name}`, `max:${d.name}`])];
  ds.extent = {};
  try {
    // Asked through query(): this first answer also tells whether plans can list grid IDs.
    const { answer } = await query({ aggregates: aggs });
    for (const d of ds.dimensions) ds.extent[d.name] = [answer.results[`min:${d.name}`], answer.results[`max:${d.name}`]];
    $("summary").textContent = `${answer.count.toLocaleString()} rows`;
  } catch (err) {
    showMessages([failed("extent", err)]);
    return;
  }
  defaults();
  buildControls();
  for (const [i, id] of [[0, "grid-x"], [1, "grid-y"]]) {
    $(id).replaceChildren(...ds.dimensions.map((d) => new Option(d.name, d.name)));
    $(id).value = gridAxes()[i];
  }
  if (lonlat()) {
    if (!mapView) mapView = createMap($("map"), onSelect);
    mapView.setSelection(state);
    mapView.showView(state.view);
    mapFitted = false;
  }
  showFrames();
  showSelection();
  await run();
}

function showSelection() {
  const text = state.box ? `box ${state.box.join(", ")}`
    : state.poly ? `polygon of ${state.poly.length} vertices` : "no box or polygon: the whole map";
  $("selection").textContent = lonlat() ? text : "this dataset has no lon/lat dimensions";
}

/** A drawn selection, rounded to the lon/lat dimensions' decimals (outward for a box). */
function onSelect(sel) {
  const [x, y] = lonlat();
  const f = (name) => 10 ** scaleOf(name);
  const fx = f(x), fy = f(y);
  state.box = sel && sel.box ? [Math.floor(sel.box[0] * fx) / fx, Math.floor(sel.box[1] * fy) / fy,
    Math.ceil(sel.box[2] * fx) / fx, Math.ceil(sel.box[3] * fy) / fy] : null;
  state.poly = sel && sel.poly ? sel.poly.map(([px, py]) => [Math.round(px * fx) / fx, Math.round(py * fy) / fy]) : null;
  showSelection();
  run();
}

function chooseView(view) {
  state.view = view;
  for (const b of $("tabs").querySelectorAll("button")) b.setAttribute("aria-selected", String(b.dataset.view === view));
  if (mapView) mapView.showView(view);
  if (ds) {
    showFrames();
    drawLeaves(leafMarks);
  }
  history.replaceState(null, "", formatState(state) || location.pathname);
}

async function start() {
  $("dataset").addEventListener("change", (e) => chooseDataset(e.target.value));
  $("run").addEventListener("click", run);
  for (const id of ["series-column", "step", "window"]) $(id).addEventListener("change", run);
  for (const id of ["grid-x", "grid-y"]) $(id).addEventListener("change", chooseGridAxes);
  for (const b of $("tabs").querySelectorAll("button")) b.addEventListener("click", () => chooseView(b.dataset.view));
  $("token-button").addEventListener("click", () => { $("token-form").hidden = !$("token-form").hidden; });
  $("token").value = readToken();
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    setReadToken($("token").value.trim());
    location.reload();
  });
  chooseView(state.view);
  try {
    datasets = (await request("/v1/datasets")).answer.datasets;
  } catch (err) {
    showMessages([failed("datasets", err)]);
    $("status").textContent = "failed";
    return;
  }
  $("dataset").replaceChildren(...datasets.map((d) => new Option(d.name, d.name)));
  await chooseDataset(state.ds);
  const readyMs = performance.now().toFixed(0); // since navigation started
  document.body.dataset.readyMs = readyMs;
  document.body.dataset.ready = "true";
  $("status").textContent = `ready in ${readyMs} ms`;
  if (mapView) await mapView.loadOutlines(); // scenery: after the first answers are drawn
  document.body.dataset.outlines = "true";
}

start();
