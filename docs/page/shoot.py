"""Screenshots of the dashboard page for the README, and how long it takes to load.

Run against a served API with data (e.g. the one `bash run.sh` leaves running):
    python docs/page/shoot.py http://127.0.0.1:8080 --out docs/page
Opens the page in Debian's headless Chromium (Playwright), times five loads from
navigation to the first answers drawn (the page marks body[data-ready]), then saves
docs/page/*.png for a few views given by their URLs (the page keeps its state there).
"""

from __future__ import annotations

import argparse
import io
import statistics
from pathlib import Path

from PIL import Image  # Pillow: installed with matplotlib
from playwright.sync_api import expect, sync_playwright

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# name -> the page's state (query string) on the demo's weather dataset
VIEWS = {
    "box": "?ds=weather&box=-84.5,33.8,-75.5,36.6&w.time=1988-01-01,1988-01-31T23:00:00"
           "&agg=count,avg:temperature,min:temperature,max:temperature,max:wind_speed&col=temperature&step=6h&window=1d",
    "grid": "?ds=weather&w.time=1980-01-01,1999-12-31T23:00:00&w.temperature=10,"
            "&agg=count,avg:temperature&col=wind_speed&step=360d&view=grid&grid=time,temperature",
    "error": "?ds=weather&w.time=1988-01-01,1988-01-31T23:00:00&w.humidity=50"
             "&agg=count,avg:temperature&col=temperature&step=1d&window=36h",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="base URL of the API, e.g. http://127.0.0.1:8080")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    base = args.url.rstrip("/")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        times = []
        for _ in range(5):
            page.goto(base + "/" + VIEWS["box"])
            page.wait_for_selector("body[data-ready=true]")
            times.append(float(page.locator("body").get_attribute("data-ready-ms")))
            expect(page.locator("body")).not_to_have_attribute("aria-busy", "true")
        print(f"page ready after {statistics.median(times):.0f} ms (median of 5 loads; "
              f"{', '.join(f'{t:.0f}' for t in times)})")
        for name, state in VIEWS.items():
            page.goto(base + "/" + state)
            page.wait_for_selector("body[data-ready=true]")
            expect(page.locator("body")).not_to_have_attribute("aria-busy", "true")
            page.wait_for_timeout(300)  # outlines are drawn once their file has arrived
            path = args.out / f"{name}.png"
            shot = Image.open(io.BytesIO(page.screenshot(full_page=True)))
            # A page is a few flat colours: 64 of them keep it sharp at a third of the bytes.
            shot.quantize(colors=64).save(path, optimize=True)
            print(f"{path}: {path.stat().st_size // 1024} KB")
        browser.close()


if __name__ == "__main__":
    main()
