"""`gridagg query`, `gridagg series` and `gridagg datasets`: questions from the terminal.

They run in-process against the configured stores (GridEngine.query / .series, no HTTP
server needed), or with --url against a running API; both give the same answers, as
the HTTP API's JSON bodies (--json) or as a table. Bad input (an unknown dataset or
column, a malformed range, an unreadable region file) is one line on stderr and exit
code 2; a store or server that cannot answer, exit code 1.

    gridagg query weather --where temperature=15:35 --where time=2021-01-01..2021-02-01 \\
        --agg avg:temperature --agg count
    gridagg series weather --where lon=-5:5 --agg avg:temperature --step 1d --window 7d
    gridagg datasets weather
"""

from __future__ import annotations

import argparse
import json
import sys
from decimal import Decimal, InvalidOperation

from gridagg.config import Settings
from gridagg.model.errors import GridaggError, InvalidInput, UnknownDataset
from gridagg.model.schema import Dataset, parse_timestamp

EXAMPLES = """\
--where DIM=LO:HI bounds a dimension (inclusive); either side may be empty (temperature=:30).
Times are ISO 8601 (time=2021-01-01T00:00:00Z:2021-01-02T00:00:00Z); LO..HI also works.
--agg is count, count:COL, sum:COL, min:COL, max:COL or avg:COL (default: count).
"""


class CliError(Exception):
    """A failure to report on one line; code 2 for bad input, 1 for anything else."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- input


def split_range(ds: Dataset, item: str) -> tuple[str, list[str | None]]:
    """"DIM=LO:HI" (or "DIM=LO..HI") -> (DIM, [LO, HI]) with None for an empty side.
    ISO times hold colons of their own: the split is the one colon where both sides are
    values of the dimension."""
    name, eq, text = item.partition("=")
    name = name.strip()
    if not eq or not name:
        raise InvalidInput(f"--where {item!r}: expected DIM=LO:HI", field="where")
    col = next((c for c in ds.dimensions if c.name == name), None)
    if col is None:
        what = "a measure, not a dimension" if name in {c.name for c in ds.measures} else "not a dimension"
        raise InvalidInput(f"--where {item!r}: {name!r} is {what} of dataset {ds.name}", field="where")

    def value(side: str) -> bool:
        if not side:
            return True
        try:
            if col.kind == "time":
                parse_timestamp(side, name)
                return True
            return Decimal(side).is_finite()
        except (InvalidInput, InvalidOperation):
            return False

    if ".." in text:
        splits = [text.split("..", 1)]
    else:
        splits = [[text[:i], text[i + 1:]] for i, ch in enumerate(text) if ch == ":"]
    fits = [[lo.strip(), hi.strip()] for lo, hi in splits if value(lo.strip()) and value(hi.strip())]
    if len(fits) != 1:
        kind = "ISO 8601 times" if col.kind == "time" else "numbers"
        why = "is ambiguous: write LO..HI" if fits else f"is not LO:HI ({kind}; either side may be empty)"
        raise InvalidInput(f"--where {item!r} {why}", field="where")
    return name, [side or None for side in fits[0]]


def where_of(ds: Dataset, items: list[str]) -> dict:
    where: dict = {}
    for item in items:
        name, bounds = split_range(ds, item)
        if name in where:
            raise InvalidInput(f"--where {name} is given twice", field="where")
        where[name] = bounds
    return where


def read_region(path: str | None) -> dict | None:
    """The GeoJSON geometry in a file: a Polygon or MultiPolygon, or a Feature or a
    FeatureCollection of one feature holding one (as map tools export them)."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            geo = json.load(f)
    except OSError as exc:
        raise InvalidInput(f"--region {path}: {exc.strerror}", field="region") from None
    except ValueError as exc:
        raise InvalidInput(f"--region {path}: not JSON ({exc})", field="region") from None
    if isinstance(geo, dict) and geo.get("type") == "FeatureCollection":
        features = geo.get("features") or []
        if len(features) != 1:
            raise InvalidInput(f"--region {path}: a FeatureCollection must hold exactly one feature, "
                               f"not {len(features)}", field="region")
        geo = features[0]
    if isinstance(geo, dict) and geo.get("type") == "Feature":
        geo = geo.get("geometry")
    return geo


# --------------------------------------------------------------------------- backends


class Local:
    """The configured stores, in this process."""

    def __init__(self, settings: Settings):
        from gridagg.engine import GridEngine

        self.engine = GridEngine.open(settings)

    def close(self) -> None:
        self.engine.close()

    def dataset(self, name: str) -> Dataset:
        return self.engine.dataset(name)

    def query(self, name, where, aggregates, region, deadline_ms) -> dict:
        result = self.engine.query(name, where, aggregates, region=region, deadline=_seconds(deadline_ms))
        return result.to_json(self.dataset(name))

    def series(self, name, where, aggregates, region, step, window, start, end, deadline_ms) -> dict:
        result = self.engine.series(name, where, aggregates, step, window=window, start=start, end=end, region=region,
                                    deadline=_seconds(deadline_ms))
        return result.to_json(self.dataset(name))

    def datasets(self) -> dict:
        return {"datasets": [ds.describe() for ds in self.engine.directory.datasets()]}

    def describe(self, name: str) -> dict:
        ds = self.dataset(name)
        out = ds.describe()
        out["row_count"] = self.engine.query(name, {}, ["count"]).values["count"]
        out["grid_count"] = self.engine.directory.leaf_count(name)
        out["retain"] = self.engine.directory.retain(name)
        return out


class Remote:
    """A running gridagg API at `url` (read token: GRIDAGG_READ_TOKEN)."""

    def __init__(self, url: str, settings: Settings):
        self.url = url.rstrip("/")
        self.token = settings.read_token

    def close(self) -> None:
        pass

    def _call(self, path: str, body: dict | None = None) -> dict:
        import urllib.error
        import urllib.request

        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=300) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as exc:
            try:
                detail = json.load(exc).get("detail") or exc.reason
            except ValueError:
                detail = exc.reason
            raise CliError(f"{detail} (HTTP {exc.code})", 2 if exc.code in (400, 404, 422) else 1) from None
        except (urllib.error.URLError, OSError) as exc:
            raise CliError(f"cannot reach {self.url}: {getattr(exc, 'reason', exc)}", 1) from None

    def dataset(self, name: str) -> Dataset:
        return Dataset.from_json(self.describe(name))

    def query(self, name, where, aggregates, region, deadline_ms) -> dict:
        body = {"where": where, "aggregates": aggregates}
        for key, value in (("region", region), ("deadline_ms", deadline_ms)):
            if value is not None:
                body[key] = value
        return self._call(f"/v1/datasets/{name}/query", body)

    def series(self, name, where, aggregates, region, step, window, start, end, deadline_ms) -> dict:
        body = {"where": where, "aggregates": aggregates, "step": step}
        for key, value in (("window", window), ("start", start), ("end", end), ("region", region),
                           ("deadline_ms", deadline_ms)):
            if value is not None:
                body[key] = value
        return self._call(f"/v1/datasets/{name}/series", body)

    def datasets(self) -> dict:
        return self._call("/v1/datasets")

    def describe(self, name: str) -> dict:
        return self._call(f"/v1/datasets/{name}")


# --------------------------------------------------------------------------- output

# An average is shown to its column's scale plus this many digits (the page does the same:
# api/page/src/numbers.js).
AVG_DIGITS = 3


def cell(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def aggregate_text(ds: Dataset, label: str, value) -> str:
    """An aggregate's answer as people read it: a number column's min, max and sum to its
    scale (35.0 for scale 1), its avg to AVG_DIGITS more digits without trailing zeros
    below the scale (0.2371, not 0.23712737127371275; 35.0, not 35.0000); counts, times
    and null as they are. --json keeps the API's full precision."""
    func, _, name = label.partition(":")
    if func == "count" or not isinstance(value, (int, float)) or isinstance(value, bool):
        return cell(value)
    scale = ds.columns[ds.column_index(name)].scale
    if func != "avg":
        return f"{value:.{scale}f}"
    whole, _, digits = f"{value:.{scale + AVG_DIGITS}f}".partition(".")
    digits = digits[:scale] + digits[scale:].rstrip("0")
    if not whole.strip("-0") and not digits.strip("0"):  # rounded to zero: no sign
        whole = "0"
    return f"{whole}.{digits}" if digits else whole


def table(headers: list[str], rows: list[list], numeric: list[bool] | None = None) -> str:
    """Columns padded to their widest cell; numbers right-aligned (numeric: which columns
    hold numbers, when the cells are text already; default: those whose values are)."""
    text = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in text]) for i, h in enumerate(headers)]
    if numeric is None:
        numeric = [bool(rows) and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows)
                   for i in range(len(headers))]

    def line(cells):
        return "  ".join((c.rjust(w) if num else c.ljust(w)) for c, w, num in zip(cells, widths, numeric)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in text)])


def plan_lines(plan: dict) -> list[str]:
    width = max(len(k) for k in plan)
    return ["plan:"] + [f"  {k.ljust(width)}  {json.dumps(v) if isinstance(v, (dict, list)) else cell(v)}"
                        for k, v in plan.items()]


def duration(seconds) -> str:
    if seconds is None:
        return "none"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def bound_text(ds: Dataset, label: str, bound: list) -> str:
    """A bound [lo, hi] as people read it: lo..hi (an open end empty)."""
    lo, hi = ("" if v is None else aggregate_text(ds, label, v) for v in bound)
    return f"{lo}..{hi}"


def answers_of(ds: Dataset, answer: dict, labels: list[str]) -> list[str]:
    """An answer's (or a series point's) aggregates as table cells: the exact value, or,
    where the deadline left it bounded, lo..hi (with "or null" when it may have none)."""
    if "bounds" not in answer:
        return [aggregate_text(ds, k, answer["results"][k]) for k in labels]
    return [bound_text(ds, k, answer["bounds"][k]) + (" or null" if k in answer["may_be_null"] else "")
            for k in labels]


def deadline_note(body: dict) -> list[str]:
    if body.get("exact", True):
        return []
    return [f"not exact: the deadline passed with {body['read_share']:.0%} of the cut leaves' rows read; "
            "lo..hi bounds hold the exact answers"]


def show_query(body: dict, ds: Dataset, args) -> str:
    labels = list(body["results"])
    out = [table(labels, [answers_of(ds, body, labels)], [True] * len(labels)), *deadline_note(body)]
    if args.plan:
        out += plan_lines(body["plan"])
    return "\n".join(out)


def show_series(body: dict, ds: Dataset, args) -> str:
    points = body["points"]
    labels = list(points[0]["results"]) if points else list(args.agg or ["count"])
    rows = [[p["time"], p["count"] if "bounds" not in p else "", *answers_of(ds, p, labels)] for p in points]
    out = [table(["time", "rows", *labels], rows, [False] + [True] * (1 + len(labels))), *deadline_note(body)]
    if args.plan:
        out += plan_lines(body["plan"])
    return "\n".join(out)


def show_datasets(body: dict, args) -> str:
    rows = [[d["name"], ", ".join(c["name"] for c in d["dimensions"]), ", ".join(c["name"] for c in d["measures"])]
            for d in body["datasets"]]
    return table(["dataset", "dimensions", "measures"], rows) if rows else "no datasets"


def show_dataset(body: dict, args) -> str:
    grid = body["grid"]
    out = [f"dataset {body['name']}: {body['row_count']} rows in {body['grid_count']} leaves",
           f"grid: n_size {grid['n_size']}, n_threshold {grid['n_threshold']}, l_time {duration(grid['l_time'])}"]
    if grid.get("chosen"):
        out.append(f"n_size: {grid['chosen']}")
    if body.get("time_dimension"):
        out.append(f"time dimension: {body['time_dimension']}")
    if body.get("region_dimensions"):
        out.append(f"region dimensions: {', '.join(body['region_dimensions'])}")
    if body.get("retain"):
        out.append(f"retain: rows older than {body['retain']} are dropped")
    rows = []
    for role, cols in (("dimension", body["dimensions"]), ("measure", body["measures"])):
        for c in cols:
            rows.append([c["name"], role, c.get("type", "number"), str(c["scale"]) if "scale" in c else "",
                         cell(c.get("min", "")), cell(c.get("max", "")), c.get("unit", ""),
                         c.get("rounding", "refuse"), "yes" if c.get("nullable") else "no"])
    out.append(table(["column", "role", "type", "scale", "min", "max", "unit", "rounding", "nullable"], rows))
    return "\n".join(out)


# --------------------------------------------------------------------------- commands


def _run(settings: Settings, args: argparse.Namespace, action) -> int:
    try:
        backend = Remote(args.url, settings) if args.url else Local(settings)
    except GridaggError as exc:
        return _fail(args, exc.detail, 1)
    except Exception as exc:  # the stores cannot be reached: not the caller's input
        return _fail(args, f"cannot open the stores: {exc}".splitlines()[0], 1)
    try:
        body, text = action(backend)
    except CliError as exc:
        return _fail(args, str(exc), exc.code)
    except (InvalidInput, UnknownDataset) as exc:
        return _fail(args, exc.detail, 2)
    except GridaggError as exc:
        return _fail(args, exc.detail, 1)
    finally:
        backend.close()
    if args.json:
        if not args.plan:
            body = {k: v for k, v in body.items() if k != "plan"}
        print(json.dumps(body))
    else:
        print(text)
    return 0


def _fail(args, message: str, code: int) -> int:
    print(f"gridagg {args.command}: error: {message}", file=sys.stderr)
    return code


def run_query(settings: Settings, args: argparse.Namespace) -> int:
    def action(backend):
        ds = backend.dataset(args.dataset)
        body = backend.query(ds.name, where_of(ds, args.where), args.agg or ["count"], read_region(args.region),
                             args.deadline)
        return body, show_query(body, ds, args)

    return _run(settings, args, action)


def run_series(settings: Settings, args: argparse.Namespace) -> int:
    def action(backend):
        ds = backend.dataset(args.dataset)
        body = backend.series(ds.name, where_of(ds, args.where), args.agg or ["count"], read_region(args.region),
                              args.step, args.window, args.start, args.end, args.deadline)
        return body, show_series(body, ds, args)

    return _run(settings, args, action)


def run_datasets(settings: Settings, args: argparse.Namespace) -> int:
    def action(backend):
        if args.dataset:
            body = backend.describe(args.dataset)
            return body, show_dataset(body, args)
        body = backend.datasets()
        return body, show_datasets(body, args)

    return _run(settings, args, action)


def _one_line_errors(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """Usage errors as one line on stderr, exit code 2 (argparse adds the usage)."""

    def error(message: str):
        print(f"gridagg {command}: error: {message} (see gridagg {command} --help)", file=sys.stderr)
        sys.exit(2)

    parser.error = error  # type: ignore[method-assign]
    return parser


def _common(p: argparse.ArgumentParser, plan: bool = True) -> None:
    p.add_argument("--json", action="store_true", help="print the HTTP API's JSON body (for scripts)")
    if plan:
        p.add_argument("--plan", action="store_true",
                       help="add the plan statistics (the paper's Table 3: grids reused and scanned, ...)")
    p.add_argument("--url", help="ask a running gridagg API (e.g. http://127.0.0.1:8080) instead of the "
                                 "configured stores")


def _question(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", help="dataset name")
    p.add_argument("--where", action="append", default=[], metavar="DIM=LO:HI",
                   help="bound a dimension (repeatable)")
    p.add_argument("--agg", action="append", metavar="AGG", help="an aggregate (repeatable; default count)")
    p.add_argument("--region", metavar="FILE.geojson", help="a GeoJSON polygon over the lon/lat dimensions")
    p.add_argument("--deadline", type=_milliseconds, metavar="MS",
                   help="answer within MS milliseconds (0: from the grid tree alone, reading no rows): what the "
                        "deadline leaves unread is shown as lo..hi bounds holding the exact answer")


def _milliseconds(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be whole milliseconds (0 or more), not {text!r}")
    return int(text)


def _seconds(deadline_ms: int | None) -> float | None:
    return None if deadline_ms is None else deadline_ms / 1000


FORMAT = argparse.RawDescriptionHelpFormatter


def add_query(subparsers) -> None:
    """`gridagg query` (entry point gridagg.cli.commands: query)."""
    fmt = FORMAT
    p = _one_line_errors(subparsers.add_parser(
        "query", help="aggregates over a box (and a polygon) of a dataset", formatter_class=fmt,
        description="Exact aggregates over the rows inside a box (and a polygon) of a dataset,\n"
                    "from the configured stores or a running API (--url).", epilog=EXAMPLES), "query")
    _question(p)
    _common(p)
    p.set_defaults(func=run_query)


def add_series(subparsers) -> None:
    """`gridagg series` (entry point gridagg.cli.commands: series)."""
    fmt = FORMAT
    p = _one_line_errors(subparsers.add_parser(
        "series", help="aggregates per time bucket (or moving window)", formatter_class=fmt,
        description="Aggregates per time step over a box of a dataset, or over a moving window\n"
                    "of whole steps ending with each one.", epilog=EXAMPLES), "series")
    _question(p)
    p.add_argument("--step", required=True, help="bucket width, e.g. 1d, 12h, 3600")
    p.add_argument("--window", help="moving window, a multiple of the step, e.g. 7d")
    p.add_argument("--start", help="first bucket's start (ISO 8601; default the data's first time)")
    p.add_argument("--end", help="last time covered (ISO 8601; default the data's last time)")
    _common(p)
    p.set_defaults(func=run_series)


def add_datasets(subparsers) -> None:
    """`gridagg datasets` (entry point gridagg.cli.commands: datasets)."""
    p = _one_line_errors(subparsers.add_parser(
        "datasets", help="list datasets, or describe one",
        description="List the datasets, or describe one: its columns (domains, scales, rounding,\n"
                    "nullable), rows, leaves and grid parameters.", formatter_class=FORMAT), "datasets")
    p.add_argument("dataset", nargs="?", help="dataset to describe")
    _common(p, plan=False)
    p.set_defaults(func=run_datasets, plan=False)
