#!/bin/bash
# Runs inside the clean Debian root that scripts/package.sh makes, as root,
# with /tmp/lockfile.deb beside it and VERSION set: installs the package,
# uses it as a person would, then purges it. Not meant to run anywhere else.
set -euo pipefail

fail() {
    echo "package-test: $*" >&2
    exit 1
}
# The exit status of COMMAND, which may fail (its stdout is dropped).
status() {
    local rc=0
    "$@" >/dev/null || rc=$?
    echo "$rc"
}

dpkg -i /tmp/lockfile.deb >/dev/null
dpkg -s lockfile | grep -qx "Status: install ok installed"
[ "$(command -v lockfile)" = /usr/bin/lockfile ] || fail "lockfile is not /usr/bin/lockfile"
[ "$(lockfile --version)" = "lockfile $VERSION" ] || fail "--version: $(lockfile --version)"

w=/tmp/package-test
mkdir "$w"

# run: the job runs under its lock and its success is recorded.
lockfile run --job smoke "$w/smoke.lock" -- sh -c "echo ran >$w/out"
[ "$(cat "$w/out")" = ran ] || fail "run did not run the job"

# A skip: the lock is held, -n exits 75 and names the holder.
# -o: the wrapper alone holds the lock, so that killing it leaves litter.
lockfile run -o --job holder "$w/held.lock" -- sleep 60 &
holder=$!
# (Killed below on purpose: no word from the shell about it.)
disown "$holder"
for _ in $(seq 100); do
    if lockfile inspect --json "$w/held.lock" | grep -q '"pid"'; then break; fi
    sleep 0.1
done
rc=$(status lockfile run -n "$w/held.lock" -- true 2>"$w/skip.err")
[ "$rc" = 75 ] || fail "a skip exited $rc, not 75"
grep -q 'job "holder"' "$w/skip.err" || fail "the skip did not name the holder: $(cat "$w/skip.err")"

# inspect: the holder, by pid, in the table and in JSON.
lockfile inspect "$w/held.lock" >"$w/inspect.txt"
grep -q holder "$w/inspect.txt" || fail "inspect: $(cat "$w/inspect.txt")"
kill -KILL "$holder"
while kill -0 "$holder" 2>/dev/null; do sleep 0.1; done

# reap: the file of the killed holder is litter; a dry run names it, --fix
# removes it, and the files of finished runs keep their records.
lockfile reap "$w" >"$w/reap.txt"
grep -q held.lock "$w/reap.txt" || fail "reap (dry run): $(cat "$w/reap.txt")"
lockfile reap --fix "$w" >/dev/null
[ ! -e "$w/held.lock" ] || fail "reap --fix left held.lock"

# check: the smoke run succeeded a moment ago; a job that never ran is
# CRITICAL (2).
lockfile check --expect-every 1h "$w/smoke.lock" >/dev/null
rc=$(status lockfile check --expect-every 1h "$w/never.lock")
[ "$rc" = 2 ] || fail "check of a job that never ran exited $rc, not 2"

# flock(1)'s command line, through a symlink named flock.
ln -s /usr/bin/lockfile "$w/flock"
"$w/flock" -n "$w/flock.lock" -c "echo flocked >$w/out"
[ "$(cat "$w/out")" = flocked ] || fail "flock did not run the command"
"$w/flock" --help | grep -q -- --conflict-exit-code || fail "flock --help"
# The package's command takes leases on every engine it was built with.
for engine in --etcd --postgres --redis; do
    lockfile run --help | grep -q -- "$engine" || fail "lockfile run --help has no $engine"
done

# The installed man page holds every long option that each --help prints.
zcat /usr/share/man/man1/lockfile.1.gz | sed 's/\\f[BIR]//g; s/\\-/-/g' >"$w/man.txt"
for sub in "" run inspect reap check beat; do
    # shellcheck disable=SC2086 # no subcommand for the top level
    for option in $(lockfile $sub --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
        grep -q -- "$option" "$w/man.txt" || fail "lockfile $sub --help has $option; the man page does not"
    done
done
for option in $("$w/flock" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
    grep -q -- "$option" "$w/man.txt" || fail "flock --help has $option; the man page does not"
done

# The bash completion loads and completes.
bash -c '
    source /usr/share/bash-completion/completions/lockfile
    complete -p lockfile >/dev/null
    COMP_WORDS=(lockfile in); COMP_CWORD=1; COMP_LINE="lockfile in"; COMP_POINT=${#COMP_LINE}
    _lockfile lockfile in lockfile
    [[ " ${COMPREPLY[*]} " == *" inspect "* ]]
' || fail "the bash completion does not complete inspect"

# The alert rules, where monitoring.md says they are (promtool checks them
# in the test command; this root has no Prometheus).
grep -q "alert: LockfileJobSilent" /usr/share/lockfile/lockfile-rules.yml ||
    fail "the package lacks /usr/share/lockfile/lockfile-rules.yml"

# The example units, verified by this root's systemd (their job is a stub).
mkdir "$w/units"
cp /usr/share/doc/lockfile/examples/*.service /usr/share/doc/lockfile/examples/*.timer "$w/units/"
printf '#!/bin/sh\n' >/usr/local/bin/nightly-backup
chmod +x /usr/local/bin/nightly-backup
# (--man=no: minbase has no man(1) to open their Documentation= with; the
# page itself is checked above.)
if ! systemd-analyze verify --man=no "$w"/units/* >"$w/verify.txt" 2>&1 || [ -s "$w/verify.txt" ]; then
    cat "$w/verify.txt" >&2
    fail "systemd-analyze verify of the example units"
fi
rm /usr/local/bin/nightly-backup

rm -rf "$w"
dpkg --purge lockfile >/dev/null
if dpkg -s lockfile >/dev/null 2>&1; then fail "lockfile is still known to dpkg after --purge"; fi
[ ! -e /usr/bin/lockfile ] || fail "/usr/bin/lockfile is still there"
echo "package-test: installed, ran run, a skip, inspect, reap, check, flock, the man page, the completion, the alert rules and the units; purged"
