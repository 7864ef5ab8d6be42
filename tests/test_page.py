"""The dashboard page at / in a real headless Chromium (Debian's, driven by Playwright),
on a dataset loaded through the API and served by a real HTTP server: a drawn box gives
the API's answer (equal to the oracle's, tests/oracle.py), first as the tree's bounds
(holding it) and then exact, the series plot has a point per bucket, the grid view draws
every leaf in view, errors show as messages, state lives in the URL."""

from __future__ import annotations

import json
import re
import socket
import threading
import uuid
from datetime import datetime
from pathlib import Path

import oracle
import pytest
from engine_support import from_position_rollup, open_engine
from gridagg_api import create_app
from gridagg_api.blueprints.page import DIST_DIR
from test_api import DEFINITION, TABLE, make_rows
from werkzeug.serving import make_server

from playwright import sync_api as playwright_sync  # noqa: E402 - a dev dependency: missing, the suite fails

expect = playwright_sync.expect

CHROMIUM = Path("/usr/bin/chromium")
# A closed network: without the background-networking flags Chromium keeps trying to
# reach Google's hosts.
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "w-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Gate:
    """WSGI middleware between the test server and the app, for answers streamed as they
    improve (NDJSON). It can hold each such stream after its first line until released
    (on a small dataset the exact answer follows the tree's bounds within a millisecond,
    and a test wants to see the bounds drawn first); cut it off before its line
    `cut_before` by dropping the connection, as a server that dies mid-answer does; and,
    with `plain`, ask the app for plain JSON whatever the client accepts, as a server
    that does not stream does."""

    def __init__(self, app, plain: bool = False):
        self.app = app
        self.plain = plain
        self.cut_before: int | None = None
        self.opened = threading.Event()
        self.opened.set()

    def __call__(self, environ, start_response):
        if self.plain:
            environ["HTTP_ACCEPT"] = "application/json"
        kinds = []

        def start(status, headers, exc_info=None):
            kinds.append(dict(headers).get("Content-Type", ""))
            return start_response(status, headers, exc_info)

        body = self.app(environ, start)
        if kinds and kinds[0].startswith("application/x-ndjson"):
            return self._held(body, environ["werkzeug.socket"])
        return body

    def _held(self, body, connection):
        try:
            for i, chunk in enumerate(body):
                if i == self.cut_before:
                    connection.shutdown(socket.SHUT_RDWR)
                    raise ConnectionAbortedError("the test cut the answer off")  # werkzeug: a dropped connection
                yield chunk
                if i == 0:
                    self.opened.wait(60)
        finally:
            getattr(body, "close", lambda: None)()

    def hold(self):
        self.opened.clear()

    def release(self):
        self.opened.set()


class Server:
    """A Flask app served over real HTTP on a free loopback port, in a thread, behind a
    Gate (plain: one that asks the app for plain JSON)."""

    def __init__(self, app, plain: bool = False):
        self.gate = Gate(app, plain)
        self.http = make_server("127.0.0.1", 0, self.gate, threaded=True)
        self.url = f"http://127.0.0.1:{self.http.server_port}"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.gate.release()
        self.http.shutdown()
        self.thread.join()


@pytest.fixture(scope="module")
def data(settings, tmp_path_factory):
    """(server, test client, dataset, encoded rows, engine): 1200 rows loaded through the
    API into a fresh dataset on the real PostgreSQL and the embedded store."""
    from gridagg.cli import services

    if not (DIST_DIR / "main.js").is_file():
        pytest.fail("the page is not built: run `bash api/page/build.sh` (run.sh and .ci/run do)")
    services.ensure_up(settings, hbase=False)
    engine = open_engine(settings, "embedded", tmp_path_factory.mktemp("page-store"))
    app = create_app(settings.with_(write_token=TOKEN, read_token=None), engine=engine)
    client = app.test_client()
    name = "t_page_" + uuid.uuid4().hex[:8]
    assert client.post("/v1/datasets", json={"name": name, **DEFINITION}, headers=AUTH).status_code == 201
    rows, encoded = make_rows(1200, seed=26)
    assert client.post(f"/v1/datasets/{name}/rows", json=rows, headers=AUTH).get_json()["stored"] == 1200
    server = Server(app)
    try:
        yield server, client, engine.dataset(name), encoded, engine
    finally:
        server.stop()
        engine.drop_dataset(name)


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (bash .ci/run does)")
    with playwright_sync.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


class Page:
    """A browser tab on the dashboard that records the API requests it makes and the
    errors its scripts raise."""

    def __init__(self, browser, base_url: str):
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.tab = self.context.new_page()
        self.requests: list = []
        self.failed: list = []  # requests that got no answer (aborted by the page, say)
        self.errors: list[str] = []
        self.tab.on("request", lambda r: self.requests.append(r) if "/v1/" in r.url else None)
        self.tab.on("requestfailed", lambda r: self.failed.append(r) if "/v1/" in r.url else None)
        self.tab.on("pageerror", lambda e: self.errors.append(str(e)))
        self.base_url = base_url

    def open(self, query: str = "", ready: bool = True):
        self.tab.goto(self.base_url + "/" + query)
        if ready:
            self.tab.wait_for_selector("body[data-ready=true]")
        self.settle()

    def settle(self):
        """Wait until no request of the page is in flight."""
        expect(self.tab.locator("body")).not_to_have_attribute("aria-busy", "true")

    def last_body(self, endpoint: str) -> dict:
        posted = [r for r in self.requests if r.method == "POST" and r.url.endswith(endpoint)]
        assert posted, f"the page posted nothing to {endpoint}"
        return posted[-1].post_data_json

    def draw_box(self, x0: float, y0: float, x1: float, y1: float, settle: bool = True):
        """Draw a rectangle with leaflet-geoman's tool, corners given as fractions of the map;
        with settle, wait until the page's requests are over."""
        self.tab.click(".leaflet-pm-icon-rectangle")
        box = self.tab.locator("#map").bounding_box()
        a = (box["x"] + x0 * box["width"], box["y"] + y0 * box["height"])
        b = (box["x"] + x1 * box["width"], box["y"] + y1 * box["height"])
        self.tab.mouse.click(*a)
        self.tab.mouse.move(*b, steps=5)
        with self.tab.expect_response(lambda r: r.url.endswith("/query") and r.request.method == "POST"):
            self.tab.mouse.click(*b)
        if settle:
            self.settle()

    def close(self):
        assert self.errors == [], self.errors
        self.context.close()


@pytest.fixture
def page(browser, data):
    tab = Page(browser, data[0].url)
    yield tab
    tab.close()


def shown(text: str):
    """A value as the page shows it, as JSON would carry it."""
    if text == "—":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def as_read(label: str, value):
    """An answer of DEFINITION's scale-1 columns as the page should show it: min, max and
    sum with 1 decimal, avg with 4 at most (1 + 3) and 1 at least, counts as they are."""
    if value is None:
        return "—"
    if label.startswith("count"):
        return str(value)
    if not label.startswith("avg"):
        return f"{value:.1f}"
    text = f"{value:.4f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def bounds_read(label: str, bounds: list, maybe_null: bool) -> str:
    """Bounds [lo, hi] of DEFINITION's columns as the page should show them: lo..hi as
    as_read writes each (an open end empty), " or null" when the answer may have none."""
    lo, hi = ("" if v is None else as_read(label, v) for v in bounds)
    return f"{lo}..{hi}" + (" or null" if maybe_null else "")


def holds(text: str, label: str, value) -> bool:
    """Whether bounds as the page shows them hold a value as it shows it."""
    text, null, _ = text.partition(" or null")
    if value is None:
        return bool(null)
    lo, hi = text.split("..")
    shown_value = float(as_read(label, value))
    return (not lo or float(lo) <= shown_value) and (not hi or shown_value <= float(hi))


def streamed(client, path: str, body: dict) -> list[dict]:
    """The answers to a request asked as it improves (NDJSON), in order."""
    resp = client.post(path, json=body, headers={"Accept": "application/x-ndjson"})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    return [json.loads(line) for line in resp.get_data(as_text=True).splitlines()]


def carried(value):
    """An oracle's value as JSON carries it: a count as it is, a number as the double
    nearest it, no value as None."""
    return value if value is None or isinstance(value, int) else float(value)


def oracle_query(encoded, request: dict) -> tuple[dict, int]:
    """The oracle's answer to a query request over the loaded rows: (label -> value as
    JSON carries it, rows selected)."""
    want = oracle.query(TABLE, TABLE.from_stored(encoded), request)
    return {label: carried(v) for label, v in want["results"].items()}, want["count"]


def oracle_points(encoded, request: dict) -> list[dict]:
    """The oracle's points of a series request over the loaded rows: label -> value as
    JSON carries it, a dict per point."""
    want = oracle.series(TABLE, TABLE.from_stored(encoded), request)
    return [{label: carried(v) for label, v in p["results"].items()} for p in want["points"]]


def overlaps(box: list, lo: str | None, hi: str | None) -> bool:
    """Whether a leaf's time box [t0, t1] (ISO text) touches [lo, hi]."""
    t = [datetime.fromisoformat(v.replace("Z", "+00:00")) for v in box]
    return ((lo is None or t[1] >= datetime.fromisoformat(lo + "+00:00"))
            and (hi is None or t[0] <= datetime.fromisoformat(hi + "+00:00")))


# --------------------------------------------------------------------------- tests


def test_leaves_project_the_grid_exactly(data):
    """/leaves equals /grids projected onto lon/lat, and each leaf's data extent is the
    min..max of the rows the oracle selects with its box; where picks the leaves it touches."""
    _, client, ds, encoded, _ = data
    seen = TABLE.from_stored(encoded)
    grids = {g["id"]: g for g in client.get(f"/v1/datasets/{ds.name}/grids").get_json()["grids"]}
    out = client.post(f"/v1/datasets/{ds.name}/leaves", json={"axes": ["lon", "lat"]}).get_json()
    assert out["grid_count"] == out["total_grids"] == len(grids) and out["rows"] == len(encoded)
    for leaf in out["grids"]:
        g = grids[leaf["id"]]
        assert leaf["count"] == g["count"] and leaf["box"] == [g["box"]["lon"], g["box"]["lat"]]
        rows = oracle.select(TABLE, seen, {"where": g["box"]})
        assert len(rows) == leaf["count"]
        if rows:
            assert leaf["data"] == [[float(f(r[axis] for r in rows)) for f in (min, max)] for axis in ("lon", "lat")]
        else:
            assert leaf["data"] is None
    where = {"time": ["2012-06-01T00:00:00Z", "2012-06-30T00:00:00Z"]}
    picked = client.post(f"/v1/datasets/{ds.name}/leaves", json={"axes": ["lat", "time"], "where": where}).get_json()
    lo, hi = (oracle.seconds(v) for v in where["time"])
    touching = {gid for gid, g in grids.items()
                if oracle.seconds(g["box"]["time"][0]) <= hi and oracle.seconds(g["box"]["time"][1]) >= lo}
    assert {g["id"] for g in picked["grids"]} == touching and 0 < len(touching) < len(grids)
    assert picked["axes"] == ["lat", "time"] and picked["grids"][0]["box"][1] == grids[picked["grids"][0]["id"]]["box"]["time"]


@pytest.mark.parametrize("body, field", [
    ({}, "axes"),
    ({"axes": ["lon"]}, "axes"),
    ({"axes": ["lon", "lon"]}, "axes"),
    ({"axes": ["lon", "temperature"]}, "axes"),
    ({"axes": ["lon", "lat"], "where": {"depth": [1, 2]}}, "where.depth"),
    ({"axes": ["lon", "lat"], "limit": 3}, "limit"),
])
def test_leaves_refuses_bad_requests_by_name(data, body, field):
    _, client, ds, _, _ = data
    resp = client.post(f"/v1/datasets/{ds.name}/leaves", json=body)
    assert resp.status_code == 400 and resp.get_json()["field"] == field, resp.get_json()



def test_a_drawn_box_shows_the_apis_answer_and_its_series(page, data):
    _, client, ds, encoded, engine = data
    page.open(f"?ds={ds.name}&agg=count,avg:temperature,min:wind_speed,max:temperature,sum:wind_speed&step=30d")
    page.draw_box(0.3, 0.25, 0.75, 0.7)

    body = page.last_body("/query")
    where = body["where"]
    x0, x1 = where["lon"]
    y0, y1 = where["lat"]
    assert x0 < x1 and y0 < y1, where
    assert f"box={x0},{y0},{x1},{y1}" in page.tab.url  # the state is in the URL
    body.pop("explain", None)
    # A box over position alone: the position rollup answers once made in the background;
    # the page is opened at its state again to show that answer.
    answer = from_position_rollup(lambda: client.post(f"/v1/datasets/{ds.name}/query", json=body).get_json(),
                                  engine.planner.positions, lambda got: "rollup_positions" in got["plan"])
    page.open(page.tab.url[len(page.base_url) + 1:])
    expected = oracle.query(TABLE, TABLE.from_stored(encoded), {"where": where, "aggregates": body["aggregates"]})
    oracle.check_answer(answer, expected)
    assert 0 < expected["count"] < len(encoded)
    cells = page.tab.locator("td[data-agg]")
    assert cells.count() == len(expected["results"])
    for label, value in answer["results"].items():
        assert page.tab.locator(f'td[data-agg="{label}"]').inner_text() == as_read(label, value), label
    assert any(len(as_read(k, v)) < len(str(v)) for k, v in answer["results"].items())  # an avg shown shorter
    for key in ("total_grids", "rows_in_reused_grids", "rows_in_scanned_grids", "rows_matched_by_scans"):
        assert shown(page.tab.locator(f'td[data-plan="{key}"]').inner_text()) == answer["plan"][key], key

    series_body = page.last_body("/series")
    assert series_body["where"] == where and series_body["step"] == "30d"
    series = client.post(f"/v1/datasets/{ds.name}/series", json=series_body).get_json()
    points = series["points"]
    assert len(points) > 5 and all(p["count"] > 0 for p in points)  # every bucket has an avg to draw
    dots = page.tab.locator("g.series-point circle")
    assert dots.count() == len(points)
    assert page.tab.locator("g.series-count rect").count() == len(points)
    titles = [dots.nth(i).locator("title").text_content() for i in range(dots.count())]
    for title, p in zip(titles, points):  # "<from> .. <to>\navg <a>, min <b>, max <c>, <n> rows"
        window, stats = title.split("\n")
        assert window == f"{p['window'][0]} .. {p['window'][1]}"
        r = p["results"]
        assert stats == (f"avg {as_read('avg', r['avg:temperature'])}, min {as_read('min', r['min:temperature'])}, "
                         f"max {as_read('max', r['max:temperature'])}, {p['count']} rows")


def test_a_drawn_box_shows_the_trees_bounds_at_once_then_the_exact_answer(page, data):
    """The page asks for answers as they improve. With the streams held after their first
    line (the tree's answer, no row read), it draws that: each aggregate as lo..hi under
    a "not exact yet" caption, each series point not exact as bands, all holding the
    oracle's answers, and the plan's share of rows read. Released, the exact answers
    replace them, as the page writes numbers."""
    server, client, ds, encoded, _ = data
    # From mid-January: over position alone the position rollup would answer exactly at once.
    page.open(f"?ds={ds.name}&agg=count,avg:temperature,min:wind_speed,max:temperature,sum:wind_speed"
              "&col=temperature&step=30d&w.time=2012-01-15T00:00:00,")
    server.gate.hold()
    try:
        page.draw_box(0.3, 0.25, 0.75, 0.7, settle=False)
        expect(page.tab.locator("#results")).to_have_attribute("data-exact", "false")
        expect(page.tab.locator("#series")).to_have_attribute("data-exact", "false")
        expect(page.tab.locator("#busy")).to_be_visible()  # the exact answers are still coming

        body = page.last_body("/query")
        body.pop("explain", None)
        first = streamed(client, f"/v1/datasets/{ds.name}/query", body)[0]
        expected, n = oracle_query(encoded, body)
        assert first["exact"] is False and 0 < n < len(encoded)
        expect(page.tab.locator("#results caption")).to_contain_text("not exact yet")
        for label, value in expected.items():
            text = page.tab.locator(f'td[data-agg="{label}"].bounded').inner_text()
            assert text == bounds_read(label, first["bounds"][label], label in first["may_be_null"]), label
            assert holds(text, label, value), (label, text, value)
        assert f"({first['read_share'] * 100:.1f} %)" in page.tab.locator('td[data-plan="read_share"]').inner_text()

        series_body = page.last_body("/series")
        points = streamed(client, f"/v1/datasets/{ds.name}/series", series_body)[0]["points"]
        wanted = oracle_points(encoded, series_body)
        assert len(wanted) == len(points)
        drawn = [(p, want) for p, want in zip(points, wanted)  # a band to draw: both ends known, lo < hi
                 if p.get("exact") is False and None not in p["bounds"]["avg:temperature"]
                 and p["bounds"]["avg:temperature"][0] < p["bounds"]["avg:temperature"][1]]
        bands = page.tab.locator("g.series-bound-avg rect")
        assert drawn and bands.count() == len(drawn)
        assert page.tab.locator("g.series-point circle").count() == len(points) - sum(p.get("exact") is False for p in points)
        for i, (p, want) in enumerate(drawn):  # "<from> .. <to> (not exact yet)\navg <a>, min <b>, max <c>, <n> rows"
            window, stats = bands.nth(i).locator("title").text_content().split("\n")
            assert window == f"{p['window'][0]} .. {p['window'][1]} (not exact yet)"
            avg, low, high, rows = stats.split(", ")
            shown_stats = {"avg": avg.removeprefix("avg "), "min": low.removeprefix("min "),
                           "max": high.removeprefix("max "), "count": rows.removesuffix(" rows")}
            for label in series_body["aggregates"]:
                text = shown_stats[label.split(":")[0]]
                assert text == bounds_read(label, p["bounds"][label], label in p["may_be_null"]), (i, label)
                assert holds(text, label, want[label]), (i, label, text, want[label])
    finally:
        server.gate.release()

    page.settle()
    expect(page.tab.locator("#results")).to_have_attribute("data-exact", "true")
    for label, value in expected.items():
        assert page.tab.locator(f'td[data-agg="{label}"]').inner_text() == as_read(label, value), label
    assert page.tab.locator("#results caption, #results td.bounded").count() == 0
    assert page.tab.locator('td[data-plan="read_share"]').inner_text().endswith("(100.0 %)")
    expect(page.tab.locator("#series")).to_have_attribute("data-exact", "true")
    dots = page.tab.locator("g.series-point circle")
    assert dots.count() == len(points)
    assert page.tab.locator("[class^=series-bound] rect, g.series-count-bound rect").count() == 0
    for i, want in enumerate(wanted):  # each point's exact values, where a band was: "...\navg <a>, min <b>, max <c>, <n> rows"
        stats = dots.nth(i).locator("title").text_content().split("\n")[1]
        assert stats == (f"avg {as_read('avg', want['avg:temperature'])}, min {as_read('min', want['min:temperature'])}, "
                         f"max {as_read('max', want['max:temperature'])}, {want['count']} rows"), i


def test_a_change_while_bounds_are_shown_drops_the_old_answer(page, data):
    """A new change aborts the run still streaming: its answers never come, the new
    run's bounds and then its exact answer do."""
    server, client, ds, encoded, _ = data
    page.open(f"?ds={ds.name}&agg=count,max:wind_speed&w.time=2012-01-15T00:00:00,")  # not over position alone
    server.gate.hold()
    try:
        page.draw_box(0.2, 0.2, 0.6, 0.6, settle=False)
        expect(page.tab.locator("#results")).to_have_attribute("data-exact", "false")
        superseded = [[r for r in page.requests if r.method == "POST" and r.url.endswith(e)][-1]
                      for e in ("/query", "/series")]
        page.tab.fill("input[name='time.lo']", "2012-05-01T00:00:00")
        with page.tab.expect_response(lambda r: r.url.endswith("/query") and r.request.method == "POST"):
            page.tab.press("input[name='time.lo']", "Enter")
        expect(page.tab.locator("#results")).to_have_attribute("data-exact", "false")
    finally:
        server.gate.release()
    page.settle()
    body = page.last_body("/query")
    assert body["where"]["time"] == ["2012-05-01T00:00:00", None]
    expected, _ = oracle_query(encoded, body)
    for label, value in expected.items():
        assert page.tab.locator(f'td[data-agg="{label}"]').inner_text() == as_read(label, value), label
    assert all(r in page.failed for r in superseded)


BOX = [-6, 43, 4, 55]  # lon -6..4, lat 43..55: cuts grids, so the tree's answer is bounds
AGGS = ["count", "avg:temperature", "max:wind_speed"]


def box_page(browser, server, ds) -> Page:
    """A tab on `server` with BOX drawn and AGGS asked (the state in its URL), settled."""
    tab = Page(browser, server.url)
    tab.open(f"?ds={ds.name}&box={','.join(map(str, BOX))}&agg={','.join(AGGS)}&col=temperature&step=30d")
    return tab


def test_a_server_answering_plain_json_is_drawn_as_its_exact_answer(browser, data):
    """A server that does not stream (it answers the page's NDJSON requests with plain
    JSON): the page draws its one answer, exact, with no bounds or caption."""
    _, client, ds, encoded, _ = data
    plain = Server(data[0].gate.app, plain=True)
    tab = box_page(browser, plain, ds)
    try:
        asked = [r for r in tab.requests if r.method == "POST" and r.url.endswith(("/query", "/series"))][-2:]
        assert [r.headers["accept"] for r in asked] == ["application/x-ndjson"] * 2
        assert all(r.response().headers["content-type"] == "application/json" for r in asked)
        body = tab.last_body("/query")
        expected, _ = oracle_query(encoded, body)
        expect(tab.tab.locator("#results")).to_have_attribute("data-exact", "true")
        for label, value in expected.items():
            assert tab.tab.locator(f'td[data-agg="{label}"]').inner_text() == as_read(label, value), label
        assert tab.tab.locator("#results caption, #results td.bounded").count() == 0
        series_body = tab.last_body("/series")
        wanted = oracle_points(encoded, series_body)
        expect(tab.tab.locator("#series")).to_have_attribute("data-exact", "true")
        assert tab.tab.locator("g.series-point circle").count() == len(wanted) > 5
        assert tab.tab.locator("[class^=series-bound] rect").count() == 0
        expect(tab.tab.locator("#message")).to_be_hidden()
    finally:
        tab.close()
        plain.stop()


def test_a_stream_cut_off_after_its_bounds_shows_an_error_and_the_bounds(browser, data):
    """The server drops the connection after the tree's bounds: the page says the answer
    was cut off and keeps showing bounds, marked not exact (and holding the oracle's
    answer), never values that look exact."""
    _, client, ds, encoded, _ = data
    cut = Server(data[0].gate.app)
    tab = box_page(browser, cut, ds)
    try:
        cut.gate.cut_before = 1
        cut.gate.hold()
        tab.tab.fill("input[name='time.lo']", "2012-03-01T00:00:00")
        tab.tab.press("input[name='time.lo']", "Enter")
        # Both held streams' bounds on show before the cut: a line the browser has not
        # read yet when the connection drops can be lost with it.
        expect(tab.tab.locator("#results")).to_have_attribute("data-exact", "false")
        expect(tab.tab.locator("#series")).to_have_attribute("data-exact", "false")
        cut.gate.release()
        tab.settle()
        message = tab.tab.locator("#message")
        expect(message).to_be_visible()
        expect(message).to_contain_text("query: Answer cut off")
        expect(message).to_contain_text("series: Answer cut off")
        body = tab.last_body("/query")
        assert body["where"]["time"] == ["2012-03-01T00:00:00", None]
        expected, n = oracle_query(encoded, body)
        assert 0 < n < len(encoded)
        expect(tab.tab.locator("#results")).to_have_attribute("data-exact", "false")
        expect(tab.tab.locator("#results caption")).to_contain_text("not exact")
        for label, value in expected.items():
            text = tab.tab.locator(f'td[data-agg="{label}"].bounded').inner_text()
            assert holds(text, label, value), (label, text, value)
        assert tab.tab.locator("td[data-agg]:not(.bounded)").count() == 0
        expect(tab.tab.locator("#series")).to_have_attribute("data-exact", "false")
        expect(tab.tab.locator("#series-note")).to_contain_text("not exact")
        expect(tab.tab.locator("#status")).to_have_text("failed")
    finally:
        tab.close()
        cut.stop()


def test_a_stream_cut_off_before_its_first_answer_leaves_no_earlier_answer(browser, data):
    """The server drops the connection before the first line of a new run's answers: the
    page says so and no longer shows the last run's exact answer or series, which would
    pass for the new one's."""
    _, _, ds, _, _ = data
    cut = Server(data[0].gate.app)
    tab = box_page(browser, cut, ds)
    try:
        expect(tab.tab.locator("#results")).to_have_attribute("data-exact", "true")
        cut.gate.cut_before = 0
        tab.tab.fill("input[name='time.lo']", "2012-03-01T00:00:00")
        tab.tab.press("input[name='time.lo']", "Enter")
        message = tab.tab.locator("#message")
        expect(message).to_contain_text("query: Server unreachable")
        tab.settle()
        expect(message).to_contain_text("series: Server unreachable")
        assert tab.tab.locator("#results td[data-agg], #series svg").count() == 0
        assert tab.tab.locator("#results[data-exact], #series[data-exact]").count() == 0
        expect(tab.tab.locator("#series-note")).to_have_text("")
    finally:
        tab.close()
        cut.stop()


def test_a_drawn_polygon_is_the_querys_region(page, data):
    _, client, ds, encoded, _ = data
    page.open(f"?ds={ds.name}&agg=count,avg:wind_speed")
    page.tab.click(".leaflet-pm-icon-polygon")
    box = page.tab.locator("#map").bounding_box()
    corners = [(0.35, 0.3), (0.7, 0.35), (0.5, 0.75)]
    points = [(box["x"] + fx * box["width"], box["y"] + fy * box["height"]) for fx, fy in corners]
    for x, y in points:
        page.tab.mouse.click(x, y)
    with page.tab.expect_response(lambda r: r.url.endswith("/query") and r.request.method == "POST"):
        page.tab.mouse.click(*points[0])  # closing the ring finishes the polygon
    page.settle()
    body = page.last_body("/query")
    ring = body["region"]["coordinates"][0]
    assert body["region"]["type"] == "Polygon" and len(ring) == 4 and ring[0] == ring[-1]
    assert "lon" not in body["where"] and "poly=" in page.tab.url
    request = {"aggregates": ["count", "avg:wind_speed"], "region": body["region"]}
    answer = client.post(f"/v1/datasets/{ds.name}/query", json=request).get_json()
    oracle.check_answer(answer, oracle.query(TABLE, TABLE.from_stored(encoded), request))
    expected = answer["results"]
    assert 0 < expected["count"] < len(encoded)
    assert page.tab.locator('td[data-agg="count"]').inner_text() == str(expected["count"])
    assert page.tab.locator('td[data-agg="avg:wind_speed"]').inner_text() == as_read("avg", expected["avg:wind_speed"])

def test_the_grid_view_draws_every_leaf_in_view(page, data):
    _, client, ds, _, _ = data
    grids = client.get(f"/v1/datasets/{ds.name}/grids").get_json()["grids"]
    page.open(f"?ds={ds.name}&view=grid")
    leaves = page.tab.locator("#map path.leaf")
    assert leaves.count() == len(grids)
    expect(page.tab.locator("#legend")).to_have_attribute("data-leaves", str(len(grids)))

    lo, hi = "2012-03-01T00:00:00", "2012-05-15T00:00:00"
    page.tab.fill("input[name='time.lo']", lo)
    page.tab.fill("input[name='time.hi']", hi)
    with page.tab.expect_response(lambda r: r.url.endswith("/leaves")):
        page.tab.press("input[name='time.hi']", "Enter")
    page.settle()
    in_view = [g for g in grids if overlaps(g["box"]["time"], lo, hi)]
    assert 0 < len(in_view) < len(grids)
    assert leaves.count() == len(in_view)

    # Marks: the grids the last query reused and scanned, when the server lists them.
    body = page.last_body("/query")
    body.pop("explain", None)
    plan = client.post(f"/v1/datasets/{ds.name}/query", json={**body, "explain": True}).get_json().get("plan", {})
    if "grids" in plan:
        reused = {g["id"] for g in in_view if any(g["id"][:i] in plan["grids"]["reused"] for i in range(1, len(g["id"]) + 1))}
        scanned = {g["id"] for g in in_view if g["id"] in plan["grids"]["scanned"]}
        assert page.tab.locator("#map path.leaf.reused").count() == len(reused)
        assert page.tab.locator("#map path.leaf.scanned").count() == len(scanned)
    else:
        assert page.tab.locator("#map path.leaf.reused, #map path.leaf.scanned").count() == 0
        expect(page.tab.locator("#legend")).to_contain_text("no marks")




def test_a_view_chosen_after_the_answers_draws_the_leaves_then(page, data):
    """Only the view on show is drawn when the leaves come; the other is drawn when it
    is chosen, with the last query's leaves and marks."""
    _, client, ds, _, _ = data
    grids = client.get(f"/v1/datasets/{ds.name}/grids").get_json()["grids"]
    page.open(f"?ds={ds.name}")
    assert page.tab.locator("#map path.rows").count() > 0
    assert page.tab.locator("#map path.leaf").count() == 0
    page.tab.click("#tabs button[data-view=grid]")
    assert page.tab.locator("#map path.leaf").count() == len(grids)
    expect(page.tab.locator("#legend")).to_have_attribute("data-leaves", str(len(grids)))
    page.tab.click("#tabs button[data-view=data]")
    assert page.tab.locator("#map path.rows").count() > 0 and page.tab.locator("#map path.leaf").count() == 0


def test_the_grid_view_projects_onto_any_two_dimensions(page, data):
    """Onto time x lat (a plain frame, not the map): the leaves that the drawn box's
    longitudes touch, one rectangle each."""
    _, client, ds, _, _ = data
    grids = client.get(f"/v1/datasets/{ds.name}/grids").get_json()["grids"]
    page.open(f"?ds={ds.name}&box=-9,45,-5,52.5&view=grid&grid=time,lat")
    expect(page.tab.locator("#map")).to_be_hidden()
    in_view = [g for g in grids if g["box"]["lon"][0] <= -5 and g["box"]["lon"][1] >= -9]
    assert 0 < len(in_view) < len(grids)
    assert page.tab.locator("#grid-plot g.leaf rect").count() == len(in_view)
    assert page.tab.locator("#grid-plot g.selection rect").count() == 1  # the box's lat range
    page.tab.select_option("#grid-y", "lon")
    page.tab.select_option("#grid-x", "lat")
    page.settle()
    assert "grid=lat,lon" in page.tab.url
    assert page.tab.locator("#grid-plot g.leaf rect").count() == len(grids)  # time is unbounded

def test_the_grid_view_marks_the_grids_the_last_query_reused_and_scanned(page, data):
    """The marks follow plan.grids of a query asked with "explain": true. Until the
    server lists grid IDs (it then refuses the key with a 400), its answer reaches the
    page with IDs of real leaves added here: an ancestor (all its leaves reused) and two
    leaves scanned (to each answer, when they come as they improve: a line each)."""
    _, client, ds, _, _ = data
    ids = sorted(g["id"] for g in client.get(f"/v1/datasets/{ds.name}/grids").get_json()["grids"])
    ancestor = ids[0][:-1]  # the parent of the first leaf: two or more leaves under it
    under = [i for i in ids if i.startswith(ancestor)]
    listed = {"reused": [ancestor], "scanned": [i for i in ids if not i.startswith(ancestor)][:2], "truncated": False}
    assert len(under) >= 2 and len(listed["scanned"]) == 2

    def answer(route):
        body = route.request.post_data_json
        resp = route.fetch()
        if resp.status == 400 and resp.json()["field"] == "explain":
            body.pop("explain")
            resp = route.fetch(post_data=body)
            answers = [json.loads(line) for line in resp.text().splitlines()]
            for out in answers:
                out["plan"]["grids"] = listed
            return route.fulfill(response=resp, body="".join(json.dumps(out) + "\n" for out in answers))
        listed.update(json.loads(resp.text().splitlines()[-1])["plan"].get("grids", {}))
        route.fulfill(response=resp)

    page.tab.route("**/query", answer)
    page.open(f"?ds={ds.name}&view=grid")
    reused = [i for i in ids if any(i[:k] in listed["reused"] for k in range(1, len(i) + 1))]
    assert page.tab.locator("#map path.leaf.reused").count() == len(reused)
    assert page.tab.locator("#map path.leaf.scanned").count() == len(set(listed["scanned"]) & set(ids))
    expect(page.tab.locator("#legend")).to_contain_text(f"reused {len(reused)}, scanned {len(listed['scanned'])}")

def test_the_state_in_the_url_gives_the_same_view(page, data, browser):
    _, _, ds, _, _ = data
    page.open(f"?ds={ds.name}&agg=count,avg:wind_speed")
    page.draw_box(0.2, 0.2, 0.6, 0.6)
    shared = page.tab.url
    answer = page.tab.locator("#results").inner_text()
    other = Page(browser, page.base_url)
    try:
        other.tab.goto(shared)
        other.tab.wait_for_selector("body[data-ready=true]")
        other.settle()
        assert other.tab.url == shared
        assert other.tab.locator("#results").inner_text() == answer
        assert other.last_body("/query")["where"] == page.last_body("/query")["where"]
    finally:
        other.close()


def test_progress_shows_while_a_query_runs(page, data):
    _, _, ds, _, _ = data
    page.open(f"?ds={ds.name}")
    held = []
    page.tab.route("**/series", lambda route: held.append(route))  # answered when we say so
    page.tab.click("#run")
    for _ in range(100):  # Playwright hands the route over while the page is being waited on
        if held:
            break
        page.tab.wait_for_timeout(50)
    expect(page.tab.locator("#busy")).to_be_visible()
    expect(page.tab.locator("#status")).to_have_text("running…")
    held[0].continue_()
    expect(page.tab.locator("#busy")).to_be_hidden()
    page.tab.unroute("**/series")


def test_a_bad_value_shows_the_apis_message(page, data):
    _, _, ds, _, _ = data
    page.open(f"?ds={ds.name}")
    page.tab.fill("input[name='time.lo']", "last spring")
    page.tab.press("input[name='time.lo']", "Enter")
    page.settle()
    message = page.tab.locator("#message")
    expect(message).to_be_visible()
    expect(message).to_contain_text("query: 400")
    expect(message).to_contain_text("'last spring' is not an ISO 8601 timestamp")



def test_a_read_token_is_asked_for_and_sent(browser, data, settings):
    """With GRIDAGG_READ_TOKEN set, the page says 401, takes the token, and sends it."""
    _, _, ds, _, engine = data
    guarded = Server(create_app(settings.with_(read_token="r-secret"), engine=engine))
    tab = Page(browser, guarded.url)
    try:
        tab.open(f"?ds={ds.name}", ready=False)
        expect(tab.tab.locator("#message")).to_contain_text("datasets: 401")
        expect(tab.tab.locator("#token-form")).to_be_visible()
        tab.tab.fill("#token", "r-secret")
        tab.tab.press("#token", "Enter")  # kept in the browser; the page starts again
        tab.tab.wait_for_selector("body[data-ready=true]")
        tab.settle()
        expect(tab.tab.locator("#message")).to_be_hidden()
        assert "r-secret" not in tab.tab.url
        sent = [r for r in tab.requests if "/v1/" in r.url]
        assert sent[-1].headers.get("authorization") == "Bearer r-secret"
    finally:
        tab.close()
        guarded.stop()

def test_a_work_limit_shows_as_a_message(browser, data, settings):
    """422: a server allowing one grid per request refuses what of the page's series and leaves
    needs more (a series the day rollups answer whole needs no grid)."""
    _, _, ds, _, engine = data
    tight = Server(create_app(settings.with_(read_token=None), engine=engine, max_grids=1))
    tab = Page(browser, tight.url)
    try:
        tab.open(f"?ds={ds.name}")
        message = tab.tab.locator("#message")
        expect(message).to_be_visible()
        expect(message).to_contain_text(re.compile(r"(series|leaves): 422"))
        expect(message).to_contain_text("more than the limit of 1")
    finally:
        tab.close()
        tight.stop()


def test_an_unreachable_store_shows_as_a_message(browser, settings, tmp_path):
    """503: the cell store does not answer (nothing listens on port 1)."""
    down = settings.with_(store="hbase", hbase="127.0.0.1:1", data_dir=tmp_path, read_token=None)
    server = Server(create_app(down))
    tab = Page(browser, server.url)
    try:
        tab.open("", ready=False)
        message = tab.tab.locator("#message")
        expect(message).to_be_visible()
        expect(message).to_contain_text("datasets: 503")
        expect(message).to_contain_text("retry in")
    finally:
        tab.close()
        server.stop()
