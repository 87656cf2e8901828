#!/usr/bin/env bash
# Sets up a fresh machine for `runner` and runs the main job on an example:
# installs `just` (pinned, from PyPI) if it is missing, builds the release binary,
# fetches and precompiles the pinned guest, validates the examples and runs the ERA
# example, printing the path of its Tool Execution Result.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-just.sh
just demo
