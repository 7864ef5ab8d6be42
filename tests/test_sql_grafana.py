"""The Grafana files in docs/grafana: the provisioning file names gridagg's SQL endpoint
as a PostgreSQL data source, and each panel of the example dashboard, its macros
expanded as Grafana's PostgreSQL data source expands them, is answered by the endpoint
over a dataset shaped like the demo's weather (a time series: a "time" column, in order)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import pytest
import yaml
from engine_support import open_engine
from sql_support import WEATHER, Endpoint, weather_rows

GRAFANA = Path(__file__).resolve().parents[1] / "docs" / "grafana"
FROM, TO = datetime(2005, 1, 1, tzinfo=timezone.utc), datetime(2006, 1, 1, tzinfo=timezone.utc)

def test_the_provisioning_file_names_the_endpoint():
    provisioned = yaml.safe_load((GRAFANA / "datasource.yaml").read_text())
    assert provisioned["apiVersion"] == 1
    (source,) = provisioned["datasources"]
    assert source["type"] in ("grafana-postgresql-datasource", "postgres")
    assert source["url"] == "127.0.0.1:5433" and source["jsonData"]["database"]
    assert source["jsonData"]["sslmode"] == "disable"  # the endpoint speaks no TLS
    assert "password" in source["secureJsonData"]


def panels() -> list[dict]:
    return json.loads((GRAFANA / "dashboard.json").read_text())["panels"]


def test_the_dashboard_uses_the_provisioned_source():
    uid = yaml.safe_load((GRAFANA / "datasource.yaml").read_text())["datasources"][0]["uid"]
    assert panels()
    for panel in panels():
        assert panel["datasource"]["uid"] == uid and panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == uid and target["rawQuery"] and target["rawSql"]
            assert target["format"] in ("time_series", "table")


def expand(sql: str, interval: str = "1d", timescaledb: bool = False) -> str:
    """Grafana's PostgreSQL macros as it expands them (pkg/tsdb/grafana-postgresql-datasource)."""
    seconds = {"1d": 86400, "1h": 3600}[interval]
    sql = sql.replace("$__interval", interval)
    stamp = lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    def macro(m: re.Match) -> str:
        name, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        if name == "__timeFilter":
            return f"{args[0]} BETWEEN '{stamp(FROM)}' AND '{stamp(TO)}'"
        group = f"time_bucket('{seconds:.3f}s',{args[0]})" if timescaledb else \
            f"floor(extract(epoch from {args[0]})/{seconds})*{seconds}"
        return group + (' AS "time"' if name == "__timeGroupAlias" else "")

    return re.sub(r"\$(__[_a-zA-Z0-9]+)\(([^)]*)\)", macro, sql)


@pytest.fixture(scope="module")
def weather(settings, services, tmp_path_factory):
    """(connection to the endpoint, a dataset shaped like weather with a year of rows)."""
    from gridagg.model.schema import Dataset

    engine = open_engine(settings, "embedded", tmp_path_factory.mktemp("sql-grafana"))
    name = "t_sqlgraf_" + uuid.uuid4().hex[:8]
    engine.create_dataset(Dataset.from_json({"name": name, **WEATHER}))
    engine.insert(name, weather_rows(FROM))
    endpoint = Endpoint(settings.with_(read_token=None), engine)
    try:
        with psycopg.connect(endpoint.dsn(), autocommit=True) as conn:
            yield conn, name
    finally:
        endpoint.close()
        engine.drop_dataset(name)


@pytest.mark.parametrize("timescaledb", [False, True])
@pytest.mark.parametrize("panel", panels(), ids=lambda p: p["title"])
def test_each_panel_is_answered(weather, panel, timescaledb):
    conn, name = weather
    for target in panel["targets"]:
        sql = re.sub(r"\bweather\b", name, expand(target["rawSql"], timescaledb=timescaledb))
        cur = conn.execute(sql)
        rows = cur.fetchall()
        assert rows, sql
        if target["format"] == "time_series":
            assert cur.description[0].name == "time"
            times = [r[0] for r in rows]
            assert times == sorted(times) and len(set(times)) == len(times)
