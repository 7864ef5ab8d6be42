"""Settings, declared once: every GRIDAGG_* environment variable gridagg reads.

Each field of :class:`Settings` is one variable, named GRIDAGG_ + the field's name in
capitals, declared with its default, its parser and one line of help; ``SETTINGS``
lists the declarations in order. Nothing else in gridagg, api/, ingest/, loadtest/ or
the tests reads a GRIDAGG_* variable: each takes what it needs from
``Settings.from_env()`` or from the Settings its caller passes, and a child process gets
them back with ``settings.environ()``.

All are optional (a fresh machine needs none); an empty variable counts as unset. A
value that does not parse raises :class:`SettingError` naming the variable, e.g.
``GRIDAGG_PG_PORT must be an integer, not 'abc'``. ``gridagg config`` prints the
effective settings (secrets masked); docs/settings.md is
``markdown_table()`` (``gridagg config --markdown``), and a test keeps the two equal.

Adding a setting: a field with ``_setting(...)`` below, then regenerate docs/settings.md.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from gridagg.model.errors import InvalidInput
from gridagg.write import faults

PREFIX = "GRIDAGG_"
TOPICS = ("servers", "store", "http", "spark", "tests")


class SettingError(InvalidInput):
    """A GRIDAGG_* variable holds a value that does not parse; the message names it."""


# --------------------------------------------------------------------------- parsers
# Each takes the variable's text and returns the value, or raises ValueError with the
# end of a sentence that starts with the variable's name.


def _text(text: str) -> str:
    return text


def _path(text: str) -> Path:
    return Path(text).expanduser().resolve()


def _integer(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"must be an integer, not {text!r}") from None
        if value < low or (high is not None and value > high):
            span = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise ValueError(f"must be {span}, not {value}")
        return value

    return parse


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"must be {' or '.join(map(repr, choices))}, not {text!r}")
        return text

    return parse


def _host_port(text: str) -> str:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"must be host:port, not {text!r}")
    return text


def _jvm_memory(text: str) -> str:
    if not re.fullmatch(r"[1-9][0-9]*[kKmMgGtT]?", text):
        raise ValueError(f"must be a JVM memory size such as 2g or 1500m, not {text!r}")
    return text


def _heap(text: str) -> str:
    if text == "auto":
        return text
    try:
        return _jvm_memory(text)
    except ValueError:
        raise ValueError(f"must be `auto` or a JVM memory size such as 2g or 1500m, not {text!r}") from None


def _faults(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(faults.parse(text).items())


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a number of seconds, not {text!r}") from None
    if not 0 < value < float("inf"):
        raise ValueError(f"must be a positive number of seconds, not {text!r}")
    return value


def _seconds_or_off(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a number of seconds (0: off), not {text!r}") from None
    if not 0 <= value < float("inf"):
        raise ValueError(f"must be 0 (off) or a positive number of seconds, not {text!r}")
    return value


def _quarter_of_memory() -> str:
    """A quarter of this machine's memory, between 2g and 32g, as a JVM memory size."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return "2g"
    return f"{min(32, max(2, total // 4 >> 30))}g"


_port = _integer(1, 65535)
_positive = _integer(1)


def _render(value) -> str:
    if isinstance(value, tuple):  # fault points
        return ",".join(f"{point}={action}" for point, action in value)
    return str(value)


# --------------------------------------------------------------------------- declaration


def _setting(default, help: str, parse: Callable[[str], object] = _text, *, topic: str,
             shown: str | None = None, secret: bool = False):
    """A Settings field for one variable. help: one line (Markdown: `code` allowed);
    shown: the default as the docs show it (default: the value itself, or "unset");
    secret: its value is never printed."""
    assert topic in TOPICS, topic
    return field(default=default, metadata={"setting": (parse, help, topic, shown, secret)})


@dataclass(frozen=True)
class Settings:
    """The effective settings: immutable and cheap to build (``from_env`` parses only
    the variables that are set); ``with_(**changes)`` makes a changed copy."""

    data_dir: Path = _setting(
        Path.home().joinpath(".gridagg").resolve(),
        "data and logs of the local servers (`pg/`, `hbase/`, `lmdb/`), Spark's class archives (`jvm/`)",
        _path, topic="servers", shown="~/.gridagg")
    pg_url: str | None = _setting(
        None, "external PostgreSQL URL; unset = the local server", topic="servers", secret=True)
    pg_port: int = _setting(55432, "port of the local PostgreSQL", _port, topic="servers")
    store: str = _setting(
        "embedded", "where rows and aggregates live: `embedded` (LMDB in the data dir) or `hbase`",
        _one_of("embedded", "hbase"), topic="store")
    hbase: str | None = _setting(
        None, "Thrift gateway of an external HBase `host:port`; unset = the local HBase", _host_port,
        topic="servers")
    hbase_port: int = _setting(9090, "Thrift port of the local HBase", _port, topic="servers")
    hbase_timeout: float = _setting(
        60.0, "seconds a call to HBase whose work grows with the rows (a scan, grid rows) may take, as "
              "long as HBase answers probes meanwhile", _seconds, topic="store")
    hbase_call_timeout: float = _setting(
        5.0, "seconds any call to HBase may wait for an answer before HBase is probed (or, for small "
             "calls, counts as unavailable: a 503)", _seconds, topic="store")
    zk_port: int = _setting(2181, "ZooKeeper port of the local HBase", _port, topic="servers")
    hbase_heap: str = _setting(
        "auto", "heap of each region server JVM of the local HBase (standalone: of its one JVM); `auto` = a "
                "quarter of the machine's memory shared by its region servers (1g to 31g each); the block "
                "cache takes as much again as half of it, off the heap: a dataset larger than the cache is "
                "read from disk, slower, not fatal "
                "(`gridagg services status` and `gridagg ingest` say the sizes)",
        _heap, topic="servers")
    hbase_region_servers: int | None = _setting(
        None, "region servers of the local HBase: `0` = standalone (one JVM); `1`-`9` = distributed on "
              "this machine (ZooKeeper, a master and that many region servers as JVMs of their own, RPC "
              "ports from `GRIDAGG_ZK_PORT` + 14000 on); unset = as last started in the data dir, else `0`",
        _integer(0, 9), topic="servers")
    epoch_dir: Path | None = _setting(
        None, "the board of dataset epochs that serving processes of one host share (HBase store); give "
              "processes on other hosts, or that stand for them, a board of their own: they then learn "
              "of each other's writes through PostgreSQL", _path, topic="store",
        shown="<data dir>/epochs")
    write_token: str | None = _setting(
        None, "bearer token required for writes over HTTP (unset: writes are refused)",
        topic="http", secret=True)
    read_token: str | None = _setting(
        None, "bearer token required for reads over HTTP (unset: reads are open)", topic="http", secret=True)
    max_body_bytes: int = _setting(
        16 * 1024 * 1024, "largest HTTP request body in bytes; larger gets 413", _positive,
        topic="http")
    max_query_ms: float = _setting(
        5000.0, "most milliseconds of work one HTTP question may cost, as the store's cost model predicts it "
                "before reading (`gridagg tune --calibrate`; without a model, no such limit); more gets 422 "
                "with the estimate (with `deadline_ms` it is answered within bounds by then)", _seconds,
        topic="http")
    # The three below keep one request's listing, series and polygon within about a second
    # of CPU (docs/api.md: Limits of one request).
    max_points: int = _setting(10_000, "most points one HTTP series request may return, and steps its window may span; more gets 422",
                               _positive, topic="http")
    max_grids: int = _setting(16_000, "most leaves one HTTP request may list (/grids, /leaves); more gets 422",
                              _positive, topic="http")
    max_vertices: int = _setting(32, "most vertices of one HTTP request's polygon region (all rings); more "
                                     "gets 422", _positive, topic="http")
    scan_threads: int = _setting(
        os.cpu_count() or 1, "threads one large scan in this process may use (the embedded store's "
                             "kernel; on HBase, concurrent calls to the region servers)", _positive,
        topic="store", shown="the machine's cores")
    max_query_seconds: float = _setting(
        60.0, "longest one query may run before it fails (422); the rows of leaves a split or merge "
              "replaced are kept twice as long for queries still reading them, so a tuning run waits that "
              "long before it splits a merged leaf anew. Give every process of a dataset the same",
        _seconds, topic="store")
    tune_every: float = _setting(
        60.0, "seconds between rounds of a serving process's online tuner, which splits and merges leaves in "
              "place for the questions it served (docs/tuning.md); `0` turns it off",
        _seconds_or_off, topic="http")
    retain_every: float = _setting(
        3600.0, "seconds between a serving process's retention rounds, which drop the rows of every dataset with "
                "a `retain` that are older than it (`gridagg retain`); `0` turns them off", _seconds_or_off,
        topic="http")
    tree_load_seconds: float = _setting(
        3.5, "longest a process may take to load one dataset's tree whole (its grids and their aggregates), "
             "at the rate of that tree's last whole load in the process: tuning (`gridagg tune`, the "
             "online tuner) splits no leaf past it, merges still shrink the tree; `0`: no limit. A process "
             "loads a tree whole only where its host keeps no current tree file; it also imports, opens its "
             "stores and answers a first question, and a fresh process loads slower than the tuning one "
             "measured: 3.5 leaves room for both within 5 s", _seconds_or_off,
        topic="store")
    spark_master: str = _setting(
        "local[*]", "Spark master of the ingest job when `--master` is not given", topic="spark")
    spark_driver_memory: str = _setting(
        _quarter_of_memory(), "Spark driver memory of the ingest job and the benchmarks (with a local master its "
                              "executors run in the same JVM)", _jvm_memory, topic="spark",
        shown="a quarter of the machine's memory, 2g to 32g")
    faults: tuple[tuple[str, str], ...] = _setting(
        (), "tests only: fault points to trigger, `point=action,...` (action `raise` or `kill`; "
            "`gridagg/faults.py`)", _faults, topic="tests", shown="unset")
    property_scale: int = _setting(
        1, "tests only: multiplies the number of examples of the property tests", _positive, topic="tests")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        """Settings from the environment (or `env`); unset or empty variables keep their
        defaults. Raises SettingError naming the first variable whose value does not parse."""
        env = os.environ if env is None else env
        return cls(**{s.name: s.parse(text) for s in SETTINGS if (text := env.get(s.variable))})

    def with_(self, **changes) -> "Settings":
        return replace(self, **changes)

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment for a child process that should see exactly these settings:
        `base` (default os.environ) without its GRIDAGG_* variables, plus every setting
        that has a value, as text."""
        base = os.environ if base is None else base
        env = {k: v for k, v in base.items() if not k.startswith(PREFIX)}
        for s in SETTINGS:
            value = getattr(self, s.name)
            if value is not None and value != ():
                env[s.variable] = _render(value)
        return env

    @property
    def local_pg_url(self) -> str:
        """URL of the PostgreSQL that `gridagg services up` runs in the data dir."""
        return f"postgresql://gridagg@127.0.0.1:{self.pg_port}/gridagg"

    @property
    def effective_pg_url(self) -> str:
        return self.pg_url or self.local_pg_url

    @property
    def local_hbase(self) -> str:
        return f"127.0.0.1:{self.hbase_port}"

    @property
    def effective_hbase(self) -> tuple[str, int]:
        """(host, port) of the HBase Thrift gateway in use."""
        host, _, port = (self.hbase or self.local_hbase).rpartition(":")
        return host, int(port)

    @property
    def lmdb_dir(self) -> Path:
        """Where the embedded store keeps its files."""
        return self.data_dir / "lmdb"


@dataclass(frozen=True)
class Setting:
    """The declaration of one variable: the Settings field it fills, its default, how
    its text is parsed, a line of help, its topic, and whether its value is secret."""

    name: str
    default: object
    parser: Callable[[str], object]
    help: str
    topic: str
    shown: str | None
    secret: bool

    @property
    def variable(self) -> str:
        return PREFIX + self.name.upper()

    @property
    def default_text(self) -> str:
        """The default as the docs show it."""
        if self.shown is not None:
            return self.shown
        return "unset" if self.default is None else _render(self.default)

    def parse(self, text: str):
        """The value of this variable's text; SettingError naming the variable if it
        does not parse."""
        try:
            return self.parser(text)
        except ValueError as exc:
            raise SettingError(f"{self.variable} {exc}", field=self.variable) from None

    def display(self, value) -> str:
        """The value as `gridagg config` prints it: secrets masked, "unset" for none."""
        if value is None or value == ():
            return "unset"
        if self.secret:
            # A URL keeps all but its password; a token shows only that it is set.
            return _mask_password(value) if "://" in value else "*** (set)"
        return _render(value)


def _mask_password(url: str) -> str:
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


SETTINGS: tuple[Setting, ...] = tuple(
    Setting(f.name, f.default, *f.metadata["setting"]) for f in fields(Settings))


# --------------------------------------------------------------------------- docs


def effective(settings: Settings, env: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(variable, value as shown, "environment" or "default") of every setting."""
    env = os.environ if env is None else env
    return [(s.variable, s.display(getattr(settings, s.name)), "environment" if env.get(s.variable) else "default")
            for s in SETTINGS]


def unknown_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """GRIDAGG_* variables that are set but are no setting (a typo, most likely)."""
    env = os.environ if env is None else env
    known = {s.variable for s in SETTINGS}
    return sorted(k for k in env if k.startswith(PREFIX) and k not in known)


def markdown_table() -> str:
    """docs/settings.md's table (variable, default, meaning), one row per setting."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for s in SETTINGS:
        default = "unset" if s.default_text == "unset" else f"`{s.default_text}`"
        lines.append(f"| `{s.variable}` | {default} | {s.help} |")
    return "\n".join(lines) + "\n"


def help_text(*topics: str) -> str:
    """The settings of these topics (all but the tests' by default) as an epilog for
    --help: a title line, then one line per variable with its default."""
    topics = topics or tuple(t for t in TOPICS if t != "tests")
    chosen = [s for s in SETTINGS if s.topic in topics]
    indent = " " * (max(len(s.variable) for s in chosen) + 4)
    lines = ["settings (environment variables, all optional; `gridagg config` shows them):"]
    for s in chosen:
        default = "" if s.default_text == "unset" else f" (default {s.default_text})"
        lines += textwrap.wrap(s.help.replace("`", "") + default, 79, initial_indent=f"  {s.variable:<{len(indent) - 2}}",
                               subsequent_indent=indent)
    return "\n".join(lines) + "\n"
