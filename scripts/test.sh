#!/usr/bin/env bash
# Runs every test of the workspace. Safe to run on a fresh machine: installs
# what the tests need when it is missing.
#
# Some tests need root (tmpfs and loop mounts, `unshare`, `setpriv` to
# another user, `mknod`): they are marked `#[ignore = "needs root: ..."]`,
# and this script runs them (`--include-ignored`) only as root, where every
# test runs. Without root it runs all the others, and ends with the list of
# the tests it skipped and why.
set -euo pipefail
cd "$(dirname "$0")/.."

root=false
if [ "$(id -u)" -eq 0 ]; then root=true; fi

# crates/lockfile-etcd generates its etcd client with protoc and tests against
# a real etcd server; crates/lockfile-postgres tests against a real PostgreSQL
# and a real PgBouncer (postgresql-common's pg_ctlcluster stands for the
# server's programs, which Debian keeps off PATH); the lock tests run
# util-linux's flock(1), python3 for a POSIX lock, and script(1) for a
# terminal; the metrics tests check every
# file with Prometheus's promtool and serve it through a real node_exporter;
# binutils' readelf reads the binary's glibc symbol versions; libfaketime
# skews the clocks of `--once-per` contenders under a lease and steps a
# PostgreSQL server's clock; crates/lockfile-redis and the command's
# `--redis` tests run a real Redis (redis-server, and its redis-cli);
# openssl makes the test CA and certificates of the PostgreSQL and Redis
# TLS tests; the tests that need root also run util-linux's unshare and
# setpriv, mkfs.btrfs for a btrfs image, and Debian's cron daemon
# (`--output-on-failure` under cron).
tools=(protoc:protobuf-compiler etcd:etcd-server pg_ctlcluster:postgresql pgbouncer:pgbouncer openssl:openssl flock:util-linux python3:python3 script:bsdutils
    promtool:prometheus prometheus-node-exporter:prometheus-node-exporter readelf:binutils
    faketime:faketime redis-server:redis-server)
if $root; then
    tools+=(unshare:util-linux setpriv:util-linux mkfs.btrfs:btrfs-progs cron:cron)
fi
missing_packages() {
    local tool
    for tool in "${tools[@]}"; do
        command -v "${tool%%:*}" >/dev/null || echo "${tool#*:}"
    done | sort -u
}
# `install [sudo -n]`: installs the missing packages.
install() {
    "$@" apt-get update -qq &&
        "$@" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}
mapfile -t missing < <(missing_packages)
if ((${#missing[@]})); then
    if $root; then
        install
        mapfile -t missing < <(missing_packages)
        if ((${#missing[@]})); then
            echo "test.sh: still missing after apt-get install: ${missing[*]}" >&2
            exit 1
        fi
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        install sudo -n || echo "test.sh: sudo -n could not install ${missing[*]}" >&2
    else
        echo "test.sh: not root, and no sudo without a password: not installing ${missing[*]}" >&2
    fi
fi
# Whether TOOL is still missing; prints its package.
missing_tool() {
    local tool
    for tool in "${tools[@]}"; do
        if [ "${tool%%:*}" = "$1" ] && ! command -v "$1" >/dev/null; then
            echo "${tool#*:}"
            return 0
        fi
    done
    return 1
}

# The tools every run needs (all but the etcd ones): a run without them is no run.
for tool in flock python3 script promtool prometheus-node-exporter readelf redis-server; do
    if package=$(missing_tool "$tool"); then
        echo "test.sh: the tests need $tool (Debian: $package): install it, or run this script as root, which installs it" >&2
        exit 1
    fi
done

# What the etcd crate can do here: `all` (build it and run its tests against a
# real server), `build` (no etcd server: build and lint it, run the tests that
# need no server), `none` (no protoc: it cannot even be built).
etcd=all
etcd_skip_reason=
if missing_tool protoc >/dev/null; then
    etcd=none
    etcd_skip_reason="protoc is missing (Debian: protobuf-compiler): crates/lockfile-etcd and the command's --etcd cannot be built"
elif missing_tool etcd >/dev/null; then
    etcd=build
    etcd_skip_reason="no etcd binary (Debian: etcd-server): these tests run a real etcd server"
fi
if [ "$etcd" != all ]; then
    echo "test.sh: skipping the etcd tests (listed at the end): $etcd_skip_reason" >&2
fi
# The PostgreSQL crate always builds (it needs no protoc); its tests and the
# command's `--postgres` tests need the servers.
postgres=all
if missing_tool pg_ctlcluster >/dev/null || missing_tool pgbouncer >/dev/null ||
    missing_tool openssl >/dev/null; then
    postgres=build
    echo "test.sh: skipping the PostgreSQL tests: no PostgreSQL, PgBouncer or openssl (Debian: postgresql, pgbouncer, openssl); these tests run real servers, some with a test CA" >&2
fi
cargo fmt --all -- --check
# No two files or modules of a crate need one another (the design rule of
# docs/architecture.md): the import graph of every crate, from its source.
python3 scripts/import-cycles.py
# No source file over 500 lines before its tests (the same section).
scripts/long-files.sh
if [ "$etcd" != none ]; then
    cargo clippy --workspace --all-targets --all-features -- -D warnings
fi
# A build without the etcd feature must stay warning-free too, and so must a
# minimal command without pings.
cargo clippy --workspace --exclude lockfile-etcd --all-targets -- -D warnings
cargo clippy -p lockfile-cli --no-default-features -- -D warnings
# The library's fallback for Unix systems without /proc, built on Linux so
# that it cannot rot (it is not tested here: its inspect cannot name holders).
RUSTFLAGS="--cfg lockfile_fallback" cargo clippy -p lockfile-core --target-dir target/fallback -- -D warnings
# ... and its async acquire (the `tokio` feature), which polls there.
RUSTFLAGS="--cfg lockfile_fallback" cargo clippy -p lockfile-core --features tokio --target-dir target/fallback -- -D warnings
# The fuzz targets: a package of their own (cargo-fuzz's layout, outside the
# workspace), built here so that they cannot rot. Their bodies run over the
# seed corpus as the `lockfile` crate's `fuzz_corpus` tests.
cargo build --manifest-path fuzz/Cargo.toml --bins --quiet
# The README's dependency line and library example, in a new project.
scripts/readme-project.sh
if [ "$etcd" != none ]; then
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps --quiet
else
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --exclude lockfile-etcd --no-deps --quiet
fi

# A hung test must fail the run, not eat the CI budget: the suite takes a
# few minutes, so half an hour means something waits forever.
limit=1800
deadline=$((SECONDS + limit))
test_args=()
if $root; then test_args=(--include-ignored); fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# `cargo test ARGS -- TEST_ARGS`, within what is left of the time limit; its
# output is kept for the list of ignored tests.
run_tests() {
    local rc=0 left=$((deadline - SECONDS))
    # (`timeout 0` would mean no limit at all.)
    if [ "$left" -le 0 ]; then left=1; fi
    timeout --foreground --kill-after=30 "$left" \
        cargo test "$@" -- "${test_args[@]}" 2>&1 | tee -a "$log" || rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 124 ]; then echo "cargo test still ran after ${limit}s: a test hangs" >&2; fi
    if [ "$rc" -ne 0 ]; then exit "$rc"; fi
}
pg_exclude=()
if [ "$postgres" != all ]; then
    # Everything but the tests that need the servers.
    run_tests -p lockfile-postgres --lib
    run_tests -p lockfile-postgres --doc
    pg_exclude=(--exclude lockfile-postgres)
fi
case $etcd in
all) if [ "$postgres" = all ]; then
    run_tests --workspace --all-features
else
    run_tests --workspace --exclude lockfile-postgres --features lockfile-cli/etcd,lockfile-cli/redis
fi ;;
build)
    # Everything but the tests that need the server: the command without its
    # `etcd` feature (which has no tests of its own but the server's), and the
    # etcd crate's unit tests, examples and doctests.
    run_tests --workspace --exclude lockfile-etcd "${pg_exclude[@]}" --features lockfile-cli/redis
    run_tests -p lockfile-etcd --lib --examples
    run_tests -p lockfile-etcd --doc
    ;;
none) run_tests --workspace --exclude lockfile-etcd "${pg_exclude[@]}" --features lockfile-cli/redis ;;
esac
# The command's --postgres tests, when the etcd feature could not be built.
if [ "$postgres" = all ] && [ "$etcd" != all ]; then
    run_tests -p lockfile-cli --features postgres --test postgres
fi

# Benchmarks never run as timed tests. CI builds them, and runs the
# comparison once in its quick size (well under a minute), so that neither
# rots. It needs the release `lockfile` binary for its whole-process rows.
cargo bench -p lockfile-bench --no-run
# The release binary is the package's (its lease engines on), so that
# scripts/package.sh below finds it built.
if [ "$etcd" != none ]; then
    cargo build --release -p lockfile-cli --features etcd,postgres,redis
else
    cargo build --release -p lockfile-cli
fi
cargo run --release -p lockfile-bench --bin compare -- --quick
# A slot waiter's lag and CPU (`--slots`), in its quick size (about 10 s).
cargo run --release -p lockfile-bench --bin slots -- --quick
# 1,000 async waiters in one process: their threads and wake-up lag, against
# as many threads blocked in the kernel's wait (a few seconds).
cargo run --release -p lockfile-bench --bin async_waiters -- --quick
# The lease engines' figures, on servers it starts itself: only where etcd
# and PostgreSQL build and run (redis-server is required above).
if [ "$etcd" = all ] && [ "$postgres" = all ]; then
    cargo run --release -p lockfile-bench --features etcd,postgres,redis --bin leases -- --quick
fi
echo "test.sh: the figures above are reported, never enforced: a MISSED target is a number to read (see BENCHMARKS.md), not a failure"

# The Debian package: built with its lease engines and tested in a clean
# Debian 12 root made with debootstrap (packaging/README.md). It needs root;
# a cold run adds a release build with that feature, debootstrap's download
# and, once per machine, the install of cargo-deb.
package_skip_reason=
if $root; then
    scripts/package.sh
else
    package_skip_reason="scripts/package.sh (the Debian package in a clean Debian root) needs root"
fi

# Every test that did not run, and why: out loud, never a silent pass.
ignored=$(awk '
    /^ *Running / { target = $2 }
    /^ *Doc-tests / { target = "doc-tests of " $2 }
    / \.\.\. ignored/ {
        line = $0
        sub(/^test /, "", line)
        sub(/ \.\.\. ignored(, )?/, "\t", line)
        split(line, part, "\t")
        printf "  %s (%s): %s\n", part[1], target, (part[2] == "" ? "ignored" : part[2])
    }' "$log")
# Cargo names a test target relative to its crate: name the crate too.
for target in $(grep -o '(tests/[a-z_]*\.rs)' <<<"$ignored" | sort -u | tr -d '()'); do
    crates=(crates/*/"$target")
    if [ "${#crates[@]}" -eq 1 ] && [ -e "${crates[0]}" ]; then
        ignored=${ignored//"($target)"/"(${crates[0]})"}
    fi
done
if [ -n "$ignored" ] || [ "$etcd" != all ] || [ -n "$package_skip_reason" ]; then
    echo
    echo "test.sh: passed, but these tests were skipped:"
    if [ -n "$ignored" ]; then
        if $root; then
            echo "ignored:"
        else
            echo "ignored (not root; as root, this script runs them too):"
        fi
        echo "$ignored"
    fi
    if [ "$etcd" != all ]; then
        echo "not run, $etcd_skip_reason:"
        awk '
            /#\[test\]/ { test = 1; next }
            test && match($0, /fn [a-z0-9_]+/) {
                name = substr($0, RSTART + 3, RLENGTH - 3)
                if (name != "child_process_entry") printf "  %s (%s)\n", name, FILENAME
                test = 0
            }' crates/lockfile-etcd/tests/*.rs crates/lockfile-cli/tests/etcd.rs
        if [ "$etcd" = none ]; then
            echo "  and the unit tests, examples and doctests of crates/lockfile-etcd"
        fi
    fi
    if [ -n "$package_skip_reason" ]; then
        echo "not run: $package_skip_reason"
    fi
fi
