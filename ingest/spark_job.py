"""Entry point for spark-submit:

    spark-submit --master spark://host:7077 ingest/spark_job.py CONFIG INPUT...

The executors need gridagg and ingest importable (installed, or shipped with --py-files).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ingest.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
