"""python -m gridagg_sql: the SQL endpoint's server (sql/server.py)."""

import sys

from .server import main

sys.exit(main())
