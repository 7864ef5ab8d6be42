"""How soon the dashboard page draws an answer after a change, timed in the browser: the
tree's bounds (the answer table's lo..hi cells, the series' bands) and then the exact
values, against the page asking for the exact answers once (as it did before answers
came as they improve).

Run against a served API with a dataset that has a time dimension and lon/lat (e.g. 10M
generated rows loaded with ingest/examples/weather_generated.toml):
    python docs/page/answer_times.py http://127.0.0.1:8080 --dataset page10m --changes 15
Opens the page in Debian's headless Chromium (Playwright) and makes changes one at a
time, each once the last is over: edits of the time range (new values, one change event)
and boxes drawn on the map (the click that closes one). Each change is made twice, in
turn first: the page as it is (answers as they improve, NDJSON) and the page with its
requests' Accept header made application/json (one exact answer each). For each it
takes the time from the change (the change event or the click) to the frame after the
answer table or the series plot is drawn (a MutationObserver sees the page replace it,
then the next animation frame and a task after it: the frame is painted), to the page
replacing it, and to the request for the answer to /query and to /series and its first
byte (Resource Timing: what the page, the server and the network take of it), and prints
medians and 90th percentiles in ms, side by side.
Both modes' requests pass through a Playwright route (it rewrites the Accept header of
one), which adds a trip through this script to each; --improving-only times the page as
it is alone, without the route.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
from datetime import datetime, timedelta

from playwright.sync_api import expect, sync_playwright

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MODES = ("as it improves", "exact once")
VIEWS = (("results", "answer table", "/query"), ("series", "series plot", "/series"))

# Records each time #results or #series is drawn again (its data-exact then says whether
# what is drawn is exact), and the frame after it; and the time of the last click.
WATCH = """() => {
  const times = { clicked: null, marks: [] };
  window.answerTimes = times;
  performance.setResourceTimingBufferSize(100000); // 250 by default: full after ~60 changes
  document.addEventListener("click", (e) => { times.clicked = e.timeStamp; }, true);
  for (const id of ["results", "series"]) {
    const el = document.getElementById(id);
    new MutationObserver(() => {
      const mark = { id, at: performance.now(), exact: el.dataset.exact, painted: null };
      times.marks.push(mark);
      requestAnimationFrame(() => {
        const after = new MessageChannel();
        after.port1.onmessage = () => { mark.painted = performance.now(); };
        after.port2.postMessage(0);
      });
    }).observe(el, { childList: true, attributes: true, attributeFilter: ["data-exact"] });
  }
}"""

# Resolves once the page is idle after a change: no request in flight and every drawing
# painted. Waited for in the page (a check every 50 ms), not polled through Playwright:
# its polling took the page's main thread more CPU than the page's own drawing.
SETTLED = """() => new Promise((resolve) => {
  const timer = setInterval(() => {
    const { marks } = window.answerTimes;
    if (document.body.getAttribute("aria-busy") !== "true" && marks.length && marks.every((m) => m.painted !== null)) {
      clearInterval(timer);
      resolve();
    }
  }, 50);
})"""

# Sets the range of dimension `name` to [lo, hi] with one change event; returns when.
EDIT_RANGE = """([name, lo, hi]) => {
  window.answerTimes.marks = [];
  document.querySelector(`input[name='${name}.lo']`).value = lo;
  const input = document.querySelector(`input[name='${name}.hi']`);
  input.value = hi;
  const at = performance.now();
  input.dispatchEvent(new Event("change"));
  return at;
}"""

# The time dimension's name and its data extent, from the range inputs' placeholders.
TIME_EXTENT = """() => {
  const input = [...document.querySelectorAll("#ranges input")].find((i) => /^\\d{4}-/.test(i.placeholder));
  const name = input.dataset.dim;
  return [name, input.placeholder, document.querySelector(`input[name='${name}.hi']`).placeholder];
}"""


def time_window(rng: random.Random, extent: list[str]) -> list[str]:
    """[name, lo, hi]: a random window of a week to five years within the data's times."""
    name, lo, hi = extent
    first, last = (datetime.fromisoformat(v.replace("Z", "+00:00")) for v in (lo, hi))
    days = timedelta(days=rng.uniform(7, 5 * 365))
    start = first + (last - first - days) * rng.random()
    return [name, *(t.strftime("%Y-%m-%dT%H:%M:%S") for t in (start, start + days))]


def random_box(rng: random.Random) -> list[float]:
    """Corners [x0, y0, x1, y1] of a rectangle as fractions of the map."""
    x0, x1 = sorted(rng.uniform(0.15, 0.85) for _ in range(2))
    y0, y1 = sorted(rng.uniform(0.15, 0.85) for _ in range(2))
    return [x0, y0, x1, y1]


def edit_range(page, window: list[str]) -> float:
    return page.evaluate(EDIT_RANGE, window)


def draw_box(page, corners: list[float]) -> float:
    """Draw the rectangle; returns the time of the click that closed it."""
    page.evaluate("() => { window.answerTimes.marks = []; }")
    page.click(".leaflet-pm-icon-rectangle")
    box = page.locator("#map").bounding_box()
    x0, y0, x1, y1 = (box["x"] + f * box["width"] if i % 2 == 0 else box["y"] + f * box["height"]
                      for i, f in enumerate(corners))
    page.mouse.click(x0, y0)
    page.mouse.move(x1, y1, steps=3)
    page.mouse.click(x1, y1)
    return page.evaluate("() => window.answerTimes.clicked")


# The requests made since `since` (performance.now()): [path end, startTime, responseStart,
# the server's time to its first line (its Server-Timing "first", ms)].
REQUESTS = """(since) => performance.getEntriesByType("resource").filter((e) => e.startTime >= since)
  .map((e) => [e.name.slice(e.name.lastIndexOf("/")), e.startTime, e.responseStart,
    (e.serverTiming.find((t) => t.name === "first") || { duration: NaN }).duration])"""


def times_of(marks: list[dict], requests: list, changed: float) -> dict:
    """{(view, "first" | "exact"): ms from the change to its frame} for the first drawing of
    each view (its bounds, or its exact values when they came at once) and its first
    exact one (None: the stream ended bounded); (view, "at once"): 1 when the first was
    exact; (view, "sent"), (view, "byte"): ms to the request of its answer and to its
    first byte; (view, "server"): of that wait, the ms the server took from its view's
    start to the first line (its Server-Timing); (view, "replaced"): ms to the page
    replacing the view (the first drawing, before its frame)."""
    out = {}
    for view, _, path in VIEWS:
        drawn = [m for m in marks if m["id"] == view]
        out[view, "first"] = drawn[0]["painted"] - changed
        out[view, "replaced"] = drawn[0]["at"] - changed
        out[view, "at once"] = int(drawn[0]["exact"] == "true")
        exact = next((m["painted"] for m in drawn if m["exact"] == "true"), None)  # None: the stream ended bounded
        out[view, "exact"] = None if exact is None else exact - changed
        sent, byte, server = next(r[1:] for r in requests if r[0] == path)
        out[view, "sent"], out[view, "byte"], out[view, "server"] = sent - changed, byte - changed, server
    return out


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="base URL of the API, e.g. http://127.0.0.1:8080")
    parser.add_argument("--dataset", required=True, help="a dataset with time and lon/lat dimensions")
    parser.add_argument("--changes", type=int, default=15, help="changes of each kind timed (default 15)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--improving-only", action="store_true",
                        help="time the page as it is alone (answers as they improve), its requests not routed")
    args = parser.parse_args()
    modes = MODES[:1] if args.improving_only else MODES
    rng = random.Random(args.seed)
    mode = {"now": MODES[0]}

    def route(r):  # both modes pass through here, so that both pay for it
        headers = dict(r.request.headers)
        if mode["now"] == "exact once":
            headers["accept"] = "application/json"
        r.continue_(headers=headers)

    found = {(kind, m): [] for kind in ("time range edited", "box drawn") for m in modes}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        if not args.improving_only:
            page.route("**/query", route)
            page.route("**/series", route)
        page.goto(f"{args.url.rstrip('/')}/?ds={args.dataset}")
        page.wait_for_selector("body[data-outlines=true]", timeout=120_000)  # the scenery drawn too
        expect(page.locator("body")).not_to_have_attribute("aria-busy", "true", timeout=120_000)
        page.evaluate(WATCH)
        extent = page.evaluate(TIME_EXTENT)
        for i in range(args.changes + 1):  # the first of each kind warms up
            window, corners = time_window(rng, extent), random_box(rng)
            for kind, change in (("time range edited", lambda: edit_range(page, window)),
                                 ("box drawn", lambda: draw_box(page, corners))):
                for m in (modes if i % 2 else modes[::-1]):
                    mode["now"] = m
                    changed = change()
                    page.evaluate(SETTLED)
                    if i:
                        found[kind, m].append(times_of(page.evaluate("() => window.answerTimes.marks"),
                                                       page.evaluate(REQUESTS, changed), changed))
        browser.close()

    print(f"{args.dataset} at {args.url}: ms from a change to the frame drawn, median / p90 of {args.changes} "
          f"changes of each kind (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for kind in ("time range edited", "box drawn"):
        improving = found[kind, MODES[0]]
        print(f"  {kind}:")
        for view, name, _ in VIEWS:
            got = lambda runs, key: [r[view, key] for r in runs if r[view, key] is not None]  # noqa: E731
            med = lambda runs, key: statistics.median(got(runs, key))  # noqa: E731
            both = lambda runs, key: f"{med(runs, key):5.0f} / {p90(got(runs, key)):5.0f}"  # noqa: E731
            line = (f"    {name}: as it improves: sent {both(improving, 'sent')}, first byte "
                    f"{both(improving, 'byte')} (server's first line {both(improving, 'server')}), replaced {both(improving, 'replaced')}, first drawn "
                    f"{both(improving, 'first')} ({sum(r[view, 'at once'] for r in improving)} of {len(improving)} "
                    f"exact at once), exact {both(improving, 'exact')} ({len(got(improving, 'exact'))} exact)")
            if not args.improving_only:
                once = found[kind, MODES[1]]
                line += (f"; exact once: first byte {both(once, 'byte')}, drawn {both(once, 'exact')}; first drawn "
                         f"x{med(improving, 'first') / med(once, 'exact'):.2f}, exact "
                         f"x{med(improving, 'exact') / med(once, 'exact'):.2f} of exact once")
            print(line)

if __name__ == "__main__":
    main()
