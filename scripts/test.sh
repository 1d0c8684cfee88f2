#!/usr/bin/env bash
# Runs every test of the workspace. Safe to run on a fresh machine: installs
# what the tests need when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace

# Benchmarks never run as timed tests. CI builds them, and runs the
# comparison once in its quick size (well under a minute), so that neither
# rots. It needs the release `lockfile` binary for its whole-process rows.
cargo bench --workspace --no-run
cargo build --release -p lockfile-cli
cargo run --release -p lockfile-bench --bin compare -- --quick
