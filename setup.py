"""The build of gridagg: setuptools as pyproject.toml declares it, plus one check.

A wheel, and an sdist (wheels are built from it), must carry the dashboard page's bundle
(api/page/dist: package data of gridagg_api), which git ignores and `bash api/page/build.sh`
builds (it needs Node.js and npm). Without it the build stops and says so: an installed
gridagg would answer 503 at its page. An editable install serves the checkout's
api/page/dist, built before or after, and is not checked.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

DIST = Path(__file__).resolve().parent / "api" / "page" / "dist"
BUNDLE = ("main.js", "main.css")  # what the page's route serves (api/blueprints/page.py)


def check_page() -> None:
    missing = [name for name in BUNDLE if not (DIST / name).is_file()]
    if missing:
        raise SystemExit(f"api/page/dist is missing ({', '.join(missing)}): run `bash api/page/build.sh` (needs "
                         "Node.js and npm) before building gridagg, or its page would answer 503")


class BuildPy(build_py):
    def run(self):
        if not self.editable_mode:
            check_page()
        super().run()


class Sdist(sdist):
    def run(self):
        check_page()
        super().run()


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
