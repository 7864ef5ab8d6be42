"""`python -m gridagg_loadtest.soak`: the soak (run.py)."""

import sys

from .run import main

sys.exit(main())
