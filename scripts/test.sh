#!/usr/bin/env bash
# Runs every test of the workspace. Safe to run on a fresh machine: installs
# what the tests need when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# crates/lockfile-etcd generates its etcd client with protoc and tests against
# a real etcd server; the lock tests run util-linux's flock(1), unshare and
# setpriv, mkfs.btrfs for a btrfs image, python3 for a POSIX lock, and
# script(1) for a terminal (the fault-injection tests also need root, and say
# so).
missing=()
command -v protoc >/dev/null || missing+=(protobuf-compiler)
command -v etcd >/dev/null || missing+=(etcd-server)
command -v flock >/dev/null && command -v setpriv >/dev/null || missing+=(util-linux)
command -v mkfs.btrfs >/dev/null || missing+=(btrfs-progs)
command -v python3 >/dev/null || missing+=(python3)
command -v script >/dev/null || missing+=(bsdutils)
command -v promtool >/dev/null || missing+=(prometheus)
command -v prometheus-node-exporter >/dev/null || missing+=(prometheus-node-exporter)
if ((${#missing[@]})); then
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
# A build without the etcd feature must stay warning-free too.
cargo clippy --workspace --exclude lockfile-etcd --all-targets -- -D warnings
# The library's fallback for Unix systems without /proc, built on Linux so
# that it cannot rot (it is not tested here: its inspect cannot name holders).
RUSTFLAGS="--cfg lockfile_fallback" cargo clippy -p lockfile --target-dir target/fallback -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps --quiet
# A hung test must fail the run, not eat the CI budget: the suite takes a
# few minutes, so half an hour means something waits forever.
limit=1800
timeout --foreground --kill-after=30 "$limit" cargo test --workspace --all-features || {
    rc=$?
    if [ "$rc" -eq 124 ]; then echo "cargo test still ran after ${limit}s: a test hangs" >&2; fi
    exit "$rc"
}

# Benchmarks never run as timed tests. CI builds them, and runs the
# comparison once in its quick size (well under a minute), so that neither
# rots. It needs the release `lockfile` binary for its whole-process rows.
cargo bench -p lockfile-bench --no-run
cargo build --release -p lockfile-cli
cargo run --release -p lockfile-bench --bin compare -- --quick
