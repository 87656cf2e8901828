#!/usr/bin/env bash
# Sets up a fresh machine for `runner` and runs the main job on an example:
# installs `just` (pinned, from PyPI) if it is missing, builds the release binary,
# fetches and precompiles the pinned guest, validates the examples and runs the ERA
# example, printing the path of its Tool Execution Result.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v just >/dev/null 2>&1; then
    python3 -m pip install --quiet 'rust-just==1.59.0'
    hash -r
fi
just demo
