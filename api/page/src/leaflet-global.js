// Leaflet as the global `L`: leaflet-geoman extends the global, so this module must be
// imported before it.
import L from "leaflet";

window.L = L;
export default L;
