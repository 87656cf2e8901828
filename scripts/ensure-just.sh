# Sourced by scripts/setup.sh and scripts/test.sh: installs `just` (pinned, from PyPI)
# when it is missing, so both commands work on a fresh machine.
if ! command -v just >/dev/null 2>&1; then
    python3 -m pip install --quiet 'rust-just==1.59.0'
    hash -r
fi
