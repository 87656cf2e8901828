#!/usr/bin/env bash
# The test command (README, and CI through .ci/run): installs `just` if it is missing,
# then `just ci`: rustfmt and clippy (warnings as errors), then the whole test suite on
# the real guests (fetched once).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-just.sh
just ci
