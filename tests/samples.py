"""The real weather samples the tests read: ../shared/data/weather beside the checkout
(CI has it there). A test that needs them and does not find them fails, saying where it
looked: a missing data set must not pass unseen as a skip."""

from __future__ import annotations

from pathlib import Path

import pytest

WEATHER = Path(__file__).resolve().parents[2] / "shared" / "data" / "weather"
FILES = [WEATHER / "703165TY.csv", WEATHER / "723170TYA.CSV"]


@pytest.fixture(scope="module", autouse=False)
def weather_samples() -> Path:
    """The samples' folder; the test fails when it is missing."""
    missing = [str(f) for f in FILES if not f.is_file()]
    if missing:
        pytest.fail(f"the real weather samples are missing ({', '.join(missing)}): the tests need "
                    "../shared/data/weather beside the checkout", pytrace=False)
    return WEATHER
