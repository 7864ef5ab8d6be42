"""python -m gridagg_ingest CONFIG INPUT... (the same as `gridagg ingest`)."""

import sys

from .cli import main

sys.exit(main())
