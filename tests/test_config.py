"""Settings declared once (gridagg.config): parsing, one clear error per bad value,
masking, the environment of child processes, the table of docs/settings.md, and the
fault points (gridagg.write.faults)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gridagg import config
from gridagg.config import SETTINGS, SettingError, Settings
from gridagg.write import faults

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_need_no_variable():
    s = Settings.from_env({})
    assert (s.pg_port, s.store, s.hbase_port, s.zk_port) == (55432, "embedded", 9090, 2181)
    assert s.pg_url is None and s.write_token is None and s.faults == ()
    assert s.data_dir == Path.home().joinpath(".gridagg").resolve()
    assert s.effective_pg_url == "postgresql://gridagg@127.0.0.1:55432/gridagg"
    assert (s.spark_master, s.max_query_ms) == ("local[*]", 5000.0)
    assert 2 <= int(s.spark_driver_memory.removesuffix("g")) <= 32  # a quarter of the machine's memory


def test_every_variable_parses_to_its_type(tmp_path):
    env = {"GRIDAGG_DATA_DIR": str(tmp_path / "d"), "GRIDAGG_PG_PORT": "6000", "GRIDAGG_STORE": "hbase",
           "GRIDAGG_HBASE": "hb.example:9091", "GRIDAGG_MAX_POINTS": "12", "GRIDAGG_SPARK_DRIVER_MEMORY": "1500m",
           "GRIDAGG_FAULTS": "insert.rows_written=raise, ingest.rows_written=kill", "GRIDAGG_PROPERTY_SCALE": "3"}
    s = Settings.from_env(env)
    assert s.data_dir == tmp_path / "d" and s.pg_port == 6000 and s.store == "hbase"
    assert s.effective_hbase == ("hb.example", 9091) and s.max_points == 12
    assert s.spark_driver_memory == "1500m" and s.property_scale == 3
    assert s.faults == (("insert.rows_written", "raise"), ("ingest.rows_written", "kill"))


def test_an_empty_variable_counts_as_unset():
    assert Settings.from_env({"GRIDAGG_PG_PORT": "", "GRIDAGG_STORE": ""}) == Settings.from_env({})


@pytest.mark.parametrize("variable, value, message", [
    ("GRIDAGG_PG_PORT", "abc", "GRIDAGG_PG_PORT must be an integer, not 'abc'"),
    ("GRIDAGG_PG_PORT", "70000", "GRIDAGG_PG_PORT must be between 1 and 65535, not 70000"),
    ("GRIDAGG_MAX_GRIDS", "0", "GRIDAGG_MAX_GRIDS must be at least 1, not 0"),
    ("GRIDAGG_STORE", "lmdb", "GRIDAGG_STORE must be 'embedded' or 'hbase', not 'lmdb'"),
    ("GRIDAGG_HBASE", "localhost", "GRIDAGG_HBASE must be host:port, not 'localhost'"),
    ("GRIDAGG_SPARK_DRIVER_MEMORY", "lots", "GRIDAGG_SPARK_DRIVER_MEMORY must be a JVM memory size"),
    ("GRIDAGG_FAULTS", "insert.rows_written", "GRIDAGG_FAULTS must be point=action items"),
    ("GRIDAGG_FAULTS", "nowhere=kill", "GRIDAGG_FAULTS names no fault point 'nowhere'"),
    ("GRIDAGG_FAULTS", "insert.rows_written=explode", "GRIDAGG_FAULTS must give insert.rows_written the action"),
])
def test_a_bad_value_is_one_error_naming_the_variable(variable, value, message):
    with pytest.raises(SettingError) as e:
        Settings.from_env({variable: value})
    assert str(e.value).startswith(message)
    assert e.value.field == variable and "\n" not in str(e.value)


def test_settings_are_immutable_and_with_makes_a_copy():
    s = Settings.from_env({})
    with pytest.raises(AttributeError):
        s.store = "hbase"
    t = s.with_(store="hbase")
    assert (s.store, t.store) == ("embedded", "hbase")


def test_environ_gives_a_child_exactly_these_settings(tmp_path):
    base = {"PATH": "/bin", "GRIDAGG_READ_TOKEN": "stale", "GRIDAGG_STORE": "hbase"}
    s = Settings.from_env({}).with_(data_dir=tmp_path, pg_port=6001, faults=(("insert.rows_written", "raise"),))
    env = s.environ(base)
    assert env["PATH"] == "/bin" and "GRIDAGG_READ_TOKEN" not in env
    assert env["GRIDAGG_STORE"] == "embedded" and env["GRIDAGG_FAULTS"] == "insert.rows_written=raise"
    assert Settings.from_env(env) == s


def test_secrets_are_masked():
    s = Settings.from_env({"GRIDAGG_WRITE_TOKEN": "w-secret", "GRIDAGG_PG_URL": "postgresql://u:pw@db:5432/g"})
    shown = {variable: value for variable, value, _ in config.effective(s, {"GRIDAGG_WRITE_TOKEN": "w-secret"})}
    assert shown["GRIDAGG_WRITE_TOKEN"] == "*** (set)" and shown["GRIDAGG_READ_TOKEN"] == "unset"
    assert shown["GRIDAGG_PG_URL"] == "postgresql://u:***@db:5432/g"
    assert "w-secret" not in str(shown) and "pw" not in str(shown)


def test_unknown_variables_are_named():
    assert config.unknown_variables({"GRIDAGG_PG_PROT": "1", "GRIDAGG_PG_PORT": "1", "HOME": "/"}) == ["GRIDAGG_PG_PROT"]


def test_every_setting_has_help_and_a_topic():
    assert len({s.variable for s in SETTINGS}) == len(SETTINGS)
    for s in SETTINGS:
        assert s.help and "\n" not in s.help and "|" not in s.help, s.variable
        assert s.topic in config.TOPICS


def test_no_module_reads_a_gridagg_variable_but_config():
    """Settings are declared and read in gridagg/config.py only: the others take them
    from Settings (or hand them to a child with Settings.environ)."""
    read = re.compile(r"""(environ(\.get)?\s*[\[(]|getenv\s*\()\s*f?["']GRIDAGG_""")
    offenders = [str(p.relative_to(ROOT)) for folder in ("gridagg", "api", "ingest", "loadtest", "demo", "hbase", "tests")
                 for p in (ROOT / folder).rglob("*.py")
                 if p != ROOT / "gridagg" / "config.py" and read.search(p.read_text())]
    assert offenders == []


def test_the_settings_doc_table_is_the_declaration():
    doc = (ROOT / "docs" / "settings.md").read_text()
    begin, end = "<!-- settings table: gridagg config --markdown -->\n", "<!-- end of settings table -->"
    assert begin in doc and end in doc
    table = doc.split(begin, 1)[1].split(end, 1)[0]
    assert table == config.markdown_table(), "docs/settings.md's table is stale: paste `gridagg config --markdown`"


def test_help_text_lists_the_settings_of_a_topic():
    text = config.help_text("http")
    assert "GRIDAGG_WRITE_TOKEN" in text and "GRIDAGG_MAX_QUERY_MS" in text and "GRIDAGG_PG_PORT" not in text
    assert all(len(line) <= 79 for line in text.splitlines()[1:])
    assert "GRIDAGG_FAULTS" not in config.help_text()  # the tests' settings only where asked for


# --------------------------------------------------------------------------- fault points


def test_a_fault_point_does_nothing_unless_armed():
    faults.hit("insert.rows_written")  # disarmed: nothing happens
    with faults.armed("insert.rows_written=raise"):
        faults.hit("insert.switching")
        with pytest.raises(faults.FaultInjected, match="insert.rows_written"):
            faults.hit("insert.rows_written")
    faults.hit("insert.rows_written")  # disarmed again after the block
