#!/usr/bin/env bash
# Checks the public API of the published library crates (lockfile,
# lockfile-lease, lockfile-etcd) against a released baseline with
# cargo-semver-checks: a change that needs a major (or, before 1.0, a minor)
# version bump fails, naming the item and the rule.
#
#   scripts/semver-check.sh [BASELINE_REV]
#
# BASELINE_REV is any git revision; the default is the newest release tag
# (`v*`). See RELEASING.md. Not run by scripts/test.sh: it builds the
# baseline's rustdoc JSON too, which takes minutes, and it only means
# something once a release is tagged.
set -euo pipefail
cd "$(dirname "$0")/.."

# The cargo-semver-checks this was written for. Its rustdoc JSON reader must
# know the toolchain's format: a newer toolchain may need a newer version.
version=0.51.0

baseline=${1:-$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null || true)}
if [ -z "$baseline" ]; then
    echo "semver-check.sh: no release tag (v*) yet, and no BASELINE_REV given: nothing to compare with" >&2
    exit 64
fi
if ! git rev-parse --verify --quiet "$baseline^{commit}" >/dev/null; then
    echo "semver-check.sh: $baseline is not a revision of this repository" >&2
    exit 64
fi
if [ "$(cargo semver-checks --version 2>/dev/null)" != "cargo-semver-checks $version" ]; then
    echo "semver-check.sh: installing cargo-semver-checks $version (several minutes, once)"
    cargo install cargo-semver-checks --version "$version" --locked --quiet
fi

echo "semver-check.sh: the public API of $(git rev-parse --short HEAD) against $baseline"
# --workspace skips the crates that are not published (publish = false).
# lockfile-etcd needs protoc, as every build of it does.
cargo semver-checks check-release --workspace --all-features --baseline-rev "$baseline"
