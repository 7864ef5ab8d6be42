#!/usr/bin/env bash
# Builds the page's bundle into api/page/dist (gitignored; shipped in the package as
# package data): npm installs the locked libraries when the lockfile changed, esbuild
# bundles them with src/. Needs Node.js and npm; nothing is fetched at run time.
set -euo pipefail
cd "$(dirname "$0")"
if ! cmp -s package-lock.json node_modules/.installed-lock.json 2>/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.installed-lock.json
fi
npm run --silent build
