"""The decimal module's rounding, the reference the tests of rounding policies hold
gridagg's encoders to (archives as they come: floats written in full)."""

from __future__ import annotations

from decimal import (
    ROUND_CEILING,
    ROUND_FLOOR,
    ROUND_HALF_EVEN,
    ROUND_HALF_UP,
    Context,
    Decimal,
)

MODES = {"half_even": ROUND_HALF_EVEN, "half_up": ROUND_HALF_UP, "floor": ROUND_FLOOR, "ceil": ROUND_CEILING}
WIDE = Context(prec=1000)  # no intermediate rounding of any test value


def decimal_rounded(text: str, scale: int, mode: str) -> tuple[int, bool]:
    """value * 10**scale rounded to an integer by the decimal module, and whether that
    changed it."""
    shifted = Decimal(text.strip()).scaleb(scale, WIDE)
    whole = shifted.to_integral_value(rounding=MODES[mode], context=WIDE)
    return int(whole), whole != shifted
