# Sourced by scripts/setup.sh and scripts/test.sh: installs `just` (pinned, from PyPI)
# when it is missing, so both commands work on a fresh machine.
if ! command -v just >/dev/null 2>&1; then
    if ! python3 -m pip install --quiet 'rust-just==1.59.0' 2>/dev/null; then
        # A Python that installs nothing outside a virtual environment (PEP 668, as
        # Debian's does): one of the project's own, under target/.
        python3 -m venv target/tools-venv
        target/tools-venv/bin/pip install --quiet 'rust-just==1.59.0'
        PATH="$PWD/target/tools-venv/bin:$PATH"
        export PATH
    fi
    hash -r
fi
