"""Shared fixtures: settings, the real servers, connections to them, unique names.

The servers are started once per session if needed (`services.ensure_up`) and are left
running afterwards; `.ci/run` stops them. Point GRIDAGG_DATA_DIR at a throwaway dir to
keep test servers apart from your own (CI uses .gridagg-ci in the checkout).
"""

from __future__ import annotations

import gc
import uuid
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from gridagg.cli import services as services_mod
from gridagg.config import Settings

# No test is timed (the machines are shared and noisy): hypothesis's per-example deadline
# off for every test, not only those that say so (a first example that paid pyarrow's
# first calls, 0.45 s, failed a CI run).
hypothesis_settings.register_profile("untimed", deadline=None)
hypothesis_settings.load_profile("untimed")


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings.from_env()


@pytest.fixture(scope="session")
def services(settings):
    """PostgreSQL and HBase are up (started here if they were not)."""
    return services_mod.ensure_up(settings, hbase=True)


@pytest.fixture
def pg_conn(settings, services):
    """A fresh autocommit connection per test (a test may restart the server)."""
    import psycopg

    conn = psycopg.connect(settings.effective_pg_url, autocommit=True)
    yield conn
    conn.close()


def _open_directories() -> dict[int, object]:
    from gridagg.directory import GridDirectory

    return {id(o): o for o in gc.get_objects() if isinstance(o, GridDirectory)}


@pytest.fixture(scope="module", autouse=True)
def close_directories():
    """Every GridDirectory a test module opened is closed when the module ends: each holds
    pooled connections (and a listener's) that no garbage collection returns, and the
    test server allows a bounded number of them."""
    before = _open_directories()
    yield
    for key, directory in _open_directories().items():
        if key not in before and hasattr(directory, "_changes"):  # not one whose opening failed
            directory.close()


@pytest.fixture(scope="session")
def hbase_address(settings) -> tuple[str, int]:
    host, _, port = (settings.hbase or settings.local_hbase).rpartition(":")
    return host, int(port)


@pytest.fixture
def hbase_conn(hbase_address, services):
    """A fresh Thrift connection per test (a test may restart the server)."""
    import happybase

    host, port = hbase_address
    conn = happybase.Connection(host, port, timeout=60000)
    yield conn
    conn.close()


@pytest.fixture(params=["embedded", "hbase"], scope="module")
def engine(request, settings, services, tmp_path_factory):
    """A GridEngine on each store in turn, shared by a module's tests (a module may
    define an engine of its own instead)."""
    from engine_support import open_engine

    return open_engine(settings, request.param, tmp_path_factory.mktemp("store"))


@pytest.fixture
def unique_name() -> str:
    """A fresh lowercase identifier (valid as SQL and HBase table name)."""
    return "t_" + uuid.uuid4().hex[:10]


_FILE_SECONDS: dict[str, float] = {}
_HBASE_DIED: list[str] = []


def _memory_available_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return -1


@pytest.fixture(scope="module", autouse=True)
def local_hbase_outlives_the_module(request, settings):
    """Not a test, a diagnosis: a dead local HBase fails every later HBase test with
    ZooKeeper timeouts, so the first module after which its master, running before, is
    gone is named in the summary with the memory left and the master's last words."""
    from gridagg_hbase import launcher

    ran = not settings.hbase and launcher.running_pid(settings, "master") is not None
    yield
    if ran and not _HBASE_DIED and launcher.running_pid(settings, "master") is None:
        logs = launcher.paths(settings).logs
        last = {name: (logs / name).read_text(errors="replace").splitlines()[-3:]
                for name in ("master.out", "master.log") if (logs / name).exists()}
        _HBASE_DIED.append(f"the local HBase master died during {request.node.nodeid} "
                           f"(MemAvailable {_memory_available_mb()} MB); last lines: {last}")


def pytest_runtest_logreport(report):
    """Each test's setup, call and teardown time, added up by its file."""
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """The time of each test file, the dearest first: what CI's budget goes to."""
    for line in _HBASE_DIED:
        terminalreporter.write_sep("=", "local HBase")
        terminalreporter.write_line(line)
    if not _FILE_SECONDS:
        return
    terminalreporter.write_sep("=", "seconds per test file")
    for path, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {path}")
    terminalreporter.write_line(f"{sum(_FILE_SECONDS.values()):8.1f} s  in all")
