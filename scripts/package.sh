#!/usr/bin/env bash
# Builds the Debian package of the `lockfile` command with cargo-deb (from
# crates/lockfile-cli/Cargo.toml's [package.metadata.deb]), then tests it for
# real: a clean Debian 12 (bookworm) minbase root made with debootstrap, the
# package installed there with `dpkg -i`, every subcommand run, the man page
# held to `--help`, the completions loaded, the example units verified with
# that root's own systemd-analyze, then `dpkg --purge` and nothing left behind.
#
# The .deb lands in TARGET/debian/ (TARGET: cargo's target directory),
# with a lockfile-dbgsym .ddeb of the binary's debug symbols.
# Building needs no root; the clean-root test does (debootstrap, chroot): as
# any other user the script builds and checks the .deb, then says out loud
# that it skipped the test.
#
# Environment:
#   DEBIAN_MIRROR            where debootstrap fetches from
#                            (default http://deb.debian.org/debian)
#   LOCKFILE_PACKAGE_CACHE   keeps the downloaded .debs of the root between
#                            runs (default ~/.cache/lockfile-package); each
#                            run still makes a new root from them
set -euo pipefail
cd "$(dirname "$0")/.."

# The cargo-deb that the metadata was written for; `--locked` builds it with
# its own lock file.
cargo_deb_version=3.8.0
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${LOCKFILE_PACKAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockfile-package}

root=false
if [ "$(id -u)" -eq 0 ]; then root=true; fi
started=$SECONDS
phase_start=$SECONDS
# Prints how long the phase that just ended took.
phase() {
    echo "package.sh: $1: $((SECONDS - phase_start))s"
    phase_start=$SECONDS
}

# Tools: protoc for the `etcd` feature, dpkg-deb to read the package, and as
# root debootstrap for the clean root (the root brings its own systemd).
tools=(protoc:protobuf-compiler dpkg-deb:dpkg)
if $root; then tools+=(debootstrap:debootstrap unshare:util-linux); fi
missing=()
for tool in "${tools[@]}"; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if ((${#missing[@]})); then
    if ! $root; then
        echo "package.sh: missing ${missing[*]} (Debian packages): install them, or run this script as root, which installs them" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
if [ "$(cargo deb --version 2>/dev/null)" != "cargo-deb $cargo_deb_version" ]; then
    echo "package.sh: installing cargo-deb $cargo_deb_version (a few minutes, once per machine)"
    cargo install cargo-deb --version "$cargo_deb_version" --locked --quiet
fi
phase "tools"

target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
docs=$target/release/lockfile-docs
version=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"name":"lockfile-cli","version":"\([^"]*\)".*/\1/p')
# The man page and the completions, from the command's clap definition (the
# metadata's assets take them from TARGET/release/lockfile-docs).
rm -rf "$docs"
cargo run --quiet -p lockfile-docgen -- "$docs"
if command -v man >/dev/null; then
    # man-db renders it without a warning from groff.
    warnings=$(MANWIDTH=80 man --warnings -l "$docs/lockfile.1" 2>&1 >/dev/null)
    if [ -n "$warnings" ]; then
        echo "package.sh: groff warns about the man page:" >&2
        echo "$warnings" >&2
        exit 1
    fi
fi
bash -c 'source "$1" && complete -p lockfile >/dev/null' bash "$docs/lockfile.bash"
# Debian's man pages are compressed (without a name or time in the header).
gzip -9n --keep "$docs/lockfile.1"
phase "man page and completions"

# It prints the path of each file it made: the .deb, and the .ddeb of the
# debug symbols.
built=$(cargo deb -p lockfile-cli --quiet --output "$target/debian")
deb=$(grep '\.deb$' <<<"$built")
echo "package.sh: built $built"
phase "release build and cargo deb"

# The package as dpkg sees it: its relations, and every file it must carry.
info=$(dpkg-deb --field "$deb" Package Version Conflicts Depends)
echo "$info"
grep -qx "Package: lockfile" <<<"$info"
grep -qx "Version: $version-1" <<<"$info"
grep -qx "Conflicts: procmail" <<<"$info"
contents=$(dpkg-deb --contents "$deb" | awk '{ print $NF }')
for path in ./usr/bin/lockfile ./usr/share/man/man1/lockfile.1.gz \
    ./usr/share/bash-completion/completions/lockfile \
    ./usr/share/zsh/vendor-completions/_lockfile \
    ./usr/share/fish/vendor_completions.d/lockfile.fish \
    ./usr/share/doc/lockfile/README.md ./usr/share/doc/lockfile/CHANGELOG.md \
    ./usr/share/doc/lockfile/copyright \
    ./usr/share/doc/lockfile/examples/nightly-backup.service \
    ./usr/share/doc/lockfile/examples/nightly-backup.timer \
    ./usr/share/doc/lockfile/examples/crontab \
    ./usr/share/lockfile/lockfile-rules.yml; do
    if ! grep -qx -- "$path" <<<"$contents"; then
        echo "package.sh: the package lacks $path; it holds:" >&2
        echo "$contents" >&2
        exit 1
    fi
done
phase "package contents"

if ! $root; then
    echo "package.sh: built and checked $deb; SKIPPED its test in a clean Debian root: that needs root (debootstrap, chroot)" >&2
    exit 0
fi

work=$(mktemp -d "$target/package-root.XXXXXX")
trap 'rm -rf "$work"' EXIT
chroot_dir=$work/root
mkdir -p "$cache/debs"
# minbase, and systemd for its systemd-analyze: nothing else.
if ! debootstrap --variant=minbase --include=systemd --cache-dir="$cache/debs" \
    bookworm "$chroot_dir" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log" >&2
    exit 1
fi
phase "debootstrap (Debian 12 minbase)"

# Every path of the root, but the kernel's file systems.
list_files() {
    (cd "$chroot_dir" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev \) -prune -o -print) |
        LC_ALL=C sort
}
list_files >"$work/before"

cp "$deb" "$chroot_dir/tmp/lockfile.deb"
cp scripts/package-test.sh "$chroot_dir/tmp/package-test.sh"
# In a mount and PID namespace of its own: /proc, /sys and /run (a tmpfs,
# as on a booted system: systemd-analyze leaves a runtime file there) go
# away with it, and so does every process the test leaves.
# shellcheck disable=SC2016 # expanded by that inner shell
unshare --mount --pid --fork --propagation private sh -c '
    set -e
    mount -t proc proc "$1/proc"
    mount -t sysfs sysfs "$1/sys"
    mount -t tmpfs -o mode=0755 tmpfs "$1/run"
    exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        LANG=C.UTF-8 VERSION="$2" /bin/bash /tmp/package-test.sh
' sh "$chroot_dir" "$version"
rm "$chroot_dir/tmp/lockfile.deb" "$chroot_dir/tmp/package-test.sh"
phase "install, exercise and purge in the root"

list_files >"$work/after"
if ! diff -u "$work/before" "$work/after"; then
    echo "package.sh: the root's files differ after the purge (above)" >&2
    exit 1
fi
echo "package.sh: passed in $((SECONDS - started))s: $deb installs, works and purges without a trace in a clean Debian 12 root"
