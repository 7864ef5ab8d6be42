"""Entry point for spark-submit:

    spark-submit --master spark://host:7077 ingest/spark_job.py CONFIG INPUT...

The driver and the executors need gridagg installed (its ingest package is gridagg_ingest).
"""

import sys

from gridagg_ingest.cli import main

if __name__ == "__main__":
    sys.exit(main())
