#!/usr/bin/env bash
# The main job (README): bash run.sh
# Sets up the venv like .ci/run, then runs the demo: local PostgreSQL, the embedded store,
# a Spark bulk load of ../shared/data/weather, the HTTP API and a few dashboard queries.
# Arguments go to `gridagg demo` (e.g. --hbase for the local real HBase).
set -euo pipefail
cd "$(dirname "$0")"

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }
if [[ -z "${GRIDAGG_PG_URL:-}" ]] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  # Only the binaries are wanted: no Debian "main" cluster, no system service.
  if [[ ! -e /etc/postgresql-common/createcluster.conf ]]; then
    as_root mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" | as_root tee /etc/postgresql-common/createcluster.conf >/dev/null
  fi
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15
fi
if ! command -v npm >/dev/null; then  # builds the page's bundle (api/page/build.sh)
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
fi
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,bench]'
export PATH="$PWD/.venv/bin:$PATH"
bash api/page/build.sh  # the page at / (api/page/dist)

exec gridagg demo "$@"
