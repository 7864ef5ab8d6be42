"""Timestamps given as epoch seconds: one beyond the calendar is bad input, not a crash."""

from __future__ import annotations

import pytest

from gridagg.model.errors import InvalidInput
from gridagg.model.schema import parse_timestamp


@pytest.mark.parametrize("seconds", [253402300800.0, -1e15, 1e300])
def test_epoch_seconds_outside_the_calendar_are_refused_by_name(seconds):
    with pytest.raises(InvalidInput, match="end: .* outside the calendar"):
        parse_timestamp(seconds, "end")


def test_epoch_seconds_inside_the_calendar_read_as_utc():
    assert parse_timestamp(0, "start").isoformat() == "1970-01-01T00:00:00+00:00"
