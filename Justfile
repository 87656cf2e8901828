# Recipes for `runner`. `just --list` shows them. CI runs `just test` (see .ci/run).

set shell := ["bash", "-euo", "pipefail", "-c"]

runner := "target/release/runner"
example := "examples/csv-stats/TR-20261121-100000Z-csv-stats.md"

# The Monty worker `runner-monty-worker` is built beside `runner`: monty 1.4.0 declares
# rust-version 1.96 and builds and works on this 1.95 toolchain, hence
# --ignore-rust-version (also on the workspace-wide test and clippy runs).

# Build the release binaries, `runner` and the Monty worker (tests run against them too).
build:
    cargo build --release --locked
    cargo build --release --locked -p runner-monty --ignore-rust-version

# Fetch, verify and precompile every pinned guest (once; later runs find them cached).
guests: build
    {{runner}} guest fetch

# Run the main job on the ERA example and print the result's path.
demo: guests
    {{runner}} validate examples/*/TR-*.md
    {{runner}} exec {{example}}

# Run the monty example (no guest needed) and print the result's path.
demo-monty: build
    {{runner}} exec examples/monty-primes/TR-20261121-101500Z-monty-primes.md

# The whole test suite, on the real guest.
test: guests
    RUNNER_TEST_GUEST="$({{runner}} guest path cpython-3.12)" cargo test --release --locked --workspace --ignore-rust-version

# What CI runs: formatting, lints, then the tests.
ci: lint test

# rustfmt and clippy, warnings as errors.
lint:
    cargo fmt --all --check
    cargo clippy --release --locked --workspace --all-targets --ignore-rust-version -- -D warnings

# Validate every example request.
validate-examples: build
    {{runner}} validate examples/*/TR-*.md

# Time request validation (a typical 5 KB request, an 8 MiB hostile one).
bench-validate:
    cargo run --release --locked --example bench_validate
