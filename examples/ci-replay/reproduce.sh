#!/usr/bin/env bash
# A CI job that reproduces the csv-stats analysis and fails when its outputs drift.
#
# baseline/ holds a committed result of `runner exec` with its lock. The job first
# verifies that the baseline is intact (every hash re-derived), then re-runs the pinned
# request with the pinned guest and policy and compares every output. Exit codes:
# 0 reproduced (MATCH), 5 an output or input drifted, 1 refused or tampered (the
# guest, policy or runner is not the pinned one, or a baseline file changed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runner=${RUNNER:-runner}
baseline=$(ls "$here"/baseline/TS-*.md | head -n 1)
request="$here/../csv-stats/TR-20261121-100000Z-csv-stats.md"
inputs="$here/../csv-stats/inputs"
"$runner" verify "$baseline" --request "$request"
"$runner" replay "$baseline" --request "$request" --inputs "$inputs" --check
