"""The CSV reader (ingest.readers.parse_csv) without Spark: every record comes out,
either as its raw text or as a record with the reason it is unusable. And every_nth,
which thins a source for the N_size choice, on its own."""

from __future__ import annotations

from gridagg_ingest.readers import Source, every_nth, parse_csv
from hypothesis import given, settings
from hypothesis import strategies as st


def rows_of(data: bytes, fields=("a", "c"), header=True, sep=","):
    return parse_csv("f.csv", data, list(fields), header, sep).to_pylist()


def test_a_file_that_is_not_text_is_one_record_with_its_reason():
    # A malformed row pyarrow cannot decode would otherwise vanish.
    out = rows_of(b"a,b,c\n1,2,3\n\xc0\x96,5\n")
    assert [(r["_line"], r["_reason"]) for r in out] == [
        (None, "csv: unreadable file: not UTF-8 text (byte 12); is the input's format right?")]


def test_fields_are_text_as_written_and_lines_count_the_header():
    out = rows_of(b"a,b,c\n 1.50,x,NA\n-0,,7\n")
    assert [(r["a"], r["c"], r["_line"], r["_reason"]) for r in out] == [(" 1.50", "NA", 2, None), ("-0", "7", 3, None)]
    assert {r["_file"] for r in out} == {"f.csv"}


def test_a_record_with_the_wrong_field_count_is_kept_with_its_reason():
    out = {r["_line"]: r for r in rows_of(b"a,b,c\n1,2,3\n4,5\n6,7,8,9\n10,11,12\n")}
    assert sorted(out) == [2, 3, 4, 5]
    assert out[3]["_reason"] == "csv: 2 fields, header has 3: '4,5'"
    assert out[4]["_reason"].startswith("csv: 4 fields, header has 3")
    assert (out[5]["a"], out[5]["_reason"]) == ("10", None)


def test_a_header_without_a_field_quarantines_every_record():
    out = rows_of(b"a,b\n1,2\n3,4\n")
    assert [r["_reason"] for r in out] == ["csv: the header has no column 'c'"] * 2


def test_no_header_uses_spark_column_names():
    out = rows_of(b"1;2;3\n4;5;6\n", fields=("_c0", "_c2"), header=False, sep=";")
    assert [(r["_c0"], r["_c2"], r["_line"]) for r in out] == [("1", "3", 1), ("4", "6", 2)]


def test_an_empty_file_has_no_records_and_a_broken_one_has_one():
    assert rows_of(b"") == []
    (bad,) = rows_of(b"a,b,c\n\xff\xfe,1,2\n")
    assert bad["_reason"].startswith("csv: unreadable file")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.text("0123456789.-x ", max_size=4), min_size=1, max_size=5), max_size=30))
def test_every_record_comes_out_once(records):
    """Good or not, each non-blank record yields exactly one output row, numbered in order;
    a record of three fields keeps its text, any other carries the reason."""
    body = "a,b,c\n" + "".join(",".join(r) + "\n" for r in records)
    kept = [r for r in records if r != [""]]  # blank lines are not records
    out = {r["_line"]: r for r in rows_of(body.encode())}
    assert sorted(out) == list(range(2, 2 + len(kept)))
    for line, rec in enumerate(kept, start=2):
        got = out[line]
        if len(rec) == 3:
            assert (got["a"], got["c"], got["_reason"]) == (rec[0], rec[2], None)
        else:
            assert got["_reason"].startswith(f"csv: {len(rec)} fields, header has 3")


@given(st.lists(st.integers(0, 9), max_size=8), st.integers(1, 5))
def test_every_nth_keeps_every_nth_row_of_a_task_across_its_batches(sizes, n):
    import pyarrow as pa

    def parse(batches):  # a task's batches, as a reader's parse would give them
        yield from batches

    start, batches = 0, []
    for size in sizes:
        batches.append(pa.record_batch([pa.array(range(start, start + size))], names=["row"]))
        start += size
    thin = every_nth(Source(df=None, parse=parse), n)
    kept = [v for b in thin.parse(iter(batches)) for v in b.column("row").to_pylist()]
    assert kept == list(range(0, start, n))
