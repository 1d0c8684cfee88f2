#!/usr/bin/env bash
# Follows the README's library section as a new user would: a new project
# whose Cargo.toml has the README's dependency line and whose main.rs is the
# README's example, built and run. The unpublished crate comes from this
# checkout through a `[patch.crates-io]` entry, and the dependencies'
# versions from this workspace's Cargo.lock, offline.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
project=$(mktemp -d)
trap 'rm -rf "$project"' EXIT

# The first ```toml and the first ```rust block after "## The library".
section=$(awk '/^## The library/ { on = 1; next } on && /^## / { exit } on' README.md)
block() {
    awk -v lang="$1" '$0 == "```" lang { on = 1; next } on && /^```/ { exit } on' <<<"$section"
}
toml=$(block toml)
rust=$(block rust)
if [ -z "$toml" ] || [ -z "$rust" ]; then
    echo "readme-project: README.md's library section lost its Cargo.toml lines or its example" >&2
    exit 1
fi

mkdir -p "$project/src"
{
    printf '[package]\nname = "readme-user"\nversion = "0.1.0"\nedition = "2024"\npublish = false\n\n'
    printf '%s\n\n' "$toml"
    printf '[patch.crates-io]\nlockfile-core = { path = "%s/crates/lockfile" }\n' "$root"
} >"$project/Cargo.toml"
printf '%s\n' "$rust" >"$project/src/main.rs"
cp Cargo.lock "$project/Cargo.lock"
CARGO_TARGET_DIR="$root/target/readme-project" \
    cargo run --quiet --offline --manifest-path "$project/Cargo.toml"
echo "readme-project: the README's dependency line and example build and run"
