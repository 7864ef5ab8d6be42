// The map: a plain lon/lat frame (no tiles) with country and US state outlines from the
// world-atlas and us-atlas packages, the selection drawn with leaflet-geoman, and two
// views of the dataset's leaves: the data (where rows are, from each leaf's stored
// extent) and the grid (each leaf's box, shaded by its rows, marked when the last query
// reused or scanned it).
import L from "./leaflet-global.js";
import "@geoman-io/leaflet-geoman-free";
import "@geoman-io/leaflet-geoman-free/dist/leaflet-geoman.css";
import "leaflet/dist/leaflet.css";
import { feature, mesh } from "topojson-client";
import { leafFill } from "./shade.js";
import countriesUrl from "world-atlas/countries-50m.json";
import statesUrl from "us-atlas/states-10m.json";

const WORLD = [[-90, -180], [90, 180]];

/** 0..1: how dark to draw count rows next to the most rows drawn (log scale). */
function shade(count, max) {
  return max > 0 ? Math.log1p(count) / Math.log1p(max) : 0;
}

/** A Leaflet map in element, with the drawing tools; onSelect(selection) is called when
 * the drawn selection changes: {box: [x0, y0, x1, y1]} | {poly: [[x, y], ...]} | null. */
export function createMap(element, onSelect) {
  const map = L.map(element, {
    crs: L.CRS.EPSG4326, center: [20, 0], zoom: 1, minZoom: 0, maxZoom: 14,
    zoomSnap: 0.25, worldCopyJump: false, attributionControl: false,
  });
  map.fitBounds(WORLD);
  map.createPane("outlines").style.zIndex = 300;
  const outlines = L.layerGroup().addTo(map);
  const outlineRenderer = L.canvas({ pane: "outlines" }); // thousands of vertices: canvas, not SVG
  // The leaves (a thousand paths) in an SVG of their own, under the drawn selection's:
  // drawing a box then lays out and paints only the small one.
  map.createPane("leaves").style.zIndex = 350;
  const leafRenderer = L.svg({ pane: "leaves" });
  const dataLayer = L.layerGroup();
  const gridLayer = L.layerGroup();
  let selection = null;

  map.pm.addControls({
    position: "topleft", drawMarker: false, drawCircleMarker: false, drawPolyline: false,
    drawCircle: false, drawText: false, cutPolygon: false, rotateMode: false,
  });
  map.pm.setGlobalOptions({ snappable: false, continueDrawing: false });

  function emit() {
    onSelect(selection ? describe(selection) : null);
  }

  function adopt(layer) {
    if (selection && selection !== layer) selection.remove();
    selection = layer;
    layer.setStyle({ color: "#d33", weight: 2, fillOpacity: 0.08 });
    layer.on("pm:edit pm:dragend", emit);
  }

  map.on("pm:create", (e) => {
    adopt(e.layer);
    emit();
  });
  map.on("pm:remove", (e) => {
    if (e.layer === selection) {
      selection = null;
      emit();
    }
  });

  async function loadOutlines() {
    const [countries, states] = await Promise.all(
      [countriesUrl, statesUrl].map((url) => fetch(url).then((r) => r.json())));
    const style = { renderer: outlineRenderer, interactive: false, pmIgnore: true, fill: false };
    L.geoJSON(feature(countries, countries.objects.countries), { ...style, color: "#999", weight: 0.8 }).addTo(outlines);
    L.geoJSON(mesh(states, states.objects.states, (a, b) => a !== b),
      { ...style, color: "#bbb", weight: 0.5 }).addTo(outlines);
  }

  return {
    map,

    /** Draw the country and US state outlines (files of the bundle). */
    loadOutlines,

    /** Show the data or the grid view. */
    showView(view) {
      (view === "grid" ? dataLayer : gridLayer).remove();
      (view === "grid" ? gridLayer : dataLayer).addTo(map);
    },

    /** Fit the map to [[x0, x1], [y0, y1]] (or the world). */
    fit(extent) {
      if (!extent) return map.fitBounds(WORLD);
      const [[x0, x1], [y0, y1]] = extent;
      const padX = Math.max((x1 - x0) * 0.15, 1), padY = Math.max((y1 - y0) * 0.15, 1);
      map.fitBounds([[Math.max(y0 - padY, -90), Math.max(x0 - padX, -180)],
        [Math.min(y1 + padY, 90), Math.min(x1 + padX, 180)]]);
    },

    /** Draw where the rows are: each distinct leaf extent once, shaded by its rows
     * (a point, when all of a leaf's rows share one position). */
    showData(leaves) {
      dataLayer.clearLayers();
      const groups = new Map();
      for (const leaf of leaves) {
        if (!leaf.data) continue;
        const key = leaf.data.flat().join(",");
        const group = groups.get(key) || { data: leaf.data, count: 0, leaves: 0 };
        group.count += leaf.count;
        group.leaves += 1;
        groups.set(key, group);
      }
      const max = Math.max(0, ...[...groups.values()].map((g) => g.count));
      for (const { data: [[x0, x1], [y0, y1]], count, leaves: n } of groups.values()) {
        const s = shade(count, max);
        const opts = { className: "rows", color: "#1f5fa8", weight: 1, fillColor: "#1f5fa8",
          fillOpacity: 0.06 + 0.4 * s, pmIgnore: true, renderer: leafRenderer };
        const layer = x0 === x1 && y0 === y1
          ? L.circleMarker([y0, x0], { ...opts, radius: 4 + 8 * s })
          : L.rectangle([[y0, x0], [y1, x1]], opts);
        layer.bindTooltip(`${count.toLocaleString()} rows in ${n} leaf grid${n > 1 ? "s" : ""}`);
        dataLayer.addLayer(layer);
      }
    },

    /** Draw every leaf's box, shaded by its rows; markOf(leaf) tells how the last query
     * treated it: "reused", "scanned" or "". */
    showGrid(leaves, markOf) {
      gridLayer.clearLayers();
      const fill = leafFill(leaves);
      for (const leaf of leaves) {
        const [[x0, x1], [y0, y1]] = leaf.box;
        const mark = markOf(leaf);
        const color = mark === "scanned" ? "#d9480f" : mark === "reused" ? "#2b8a3e" : "#5f3dc4";
        const layer = L.rectangle([[y0, x0], [y1, x1]], {
          className: `leaf ${mark}`.trim(), color, weight: mark ? 2 : 0.7, opacity: mark ? 0.9 : 0.5,
          fillColor: "#6741d9", fillOpacity: fill(leaf), pmIgnore: true, renderer: leafRenderer,
        });
        layer.bindTooltip(`grid ${leaf.id}: ${leaf.count.toLocaleString()} rows${mark ? `, ${mark}` : ""}`);
        gridLayer.addLayer(layer);
      }
    },

    /** Replace the drawn selection (from the URL): a box, a polygon or nothing. */
    setSelection(state) {
      if (selection) selection.remove();
      selection = null;
      if (state.box) {
        const [x0, y0, x1, y1] = state.box;
        adopt(L.rectangle([[y0, x0], [y1, x1]]).addTo(map));
      } else if (state.poly) {
        adopt(L.polygon(state.poly.map(([x, y]) => [y, x])).addTo(map));
      }
    },
  };
}

/** A drawn layer as the page's selection, in lon/lat. */
function describe(layer) {
  if (layer instanceof L.Rectangle) {
    const b = layer.getBounds();
    return { box: [b.getWest(), b.getSouth(), b.getEast(), b.getNorth()] };
  }
  const ring = layer.toGeoJSON().geometry.coordinates[0];
  return { poly: ring.slice(0, -1) };
}
