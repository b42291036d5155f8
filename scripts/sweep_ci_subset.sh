#!/usr/bin/env bash
# Export sweep over the `ci` subset (44 representative model types across every modality) to
# both backends, then COVERAGE.md from the results. Resumable: rerunning skips recorded pairs.
#
#   scripts/sweep_ci_subset.sh [results.json] [COVERAGE.md]
#
# Not part of the default pytest run (it takes tens of minutes on 2 cores). To check a committed
# table instead:  uv run export-sweep check COVERAGE.md -j 2
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-sweep-ci-results.json}"
coverage="${2:-COVERAGE.md}"
uv run export-sweep --subset ci --backend all -j "${JOBS:-2}" --out "$out"
uv run export-sweep coverage "$out" -o "$coverage"
