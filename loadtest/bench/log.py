"""The bench's progress lines, on stderr with the time of day."""

from __future__ import annotations

import sys
import time


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
