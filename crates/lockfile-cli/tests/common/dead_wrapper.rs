//! A lease's wrapper killed by SIGKILL, whatever the engine: its whole tree
//! (a child in COMMAND's session, one in a session of its own, a daemon that
//! double-forked away) must be gone before the lease can lapse, or a second
//! holder would run beside it.

use super::{Background, BoundedOutput, Dir, code, lockfile, require_flock, s, stderr, wait_until};

/// The environment variable that marks the first holder's processes, so
/// that they can be found in `/proc` whatever became of their parents.
pub(crate) const MARK: &str = "LOCKFILE_TEST_TREE";

/// The living processes (zombies have exited) whose environment holds
/// `MARK=mark`, with their command names.
pub(crate) fn marked(mark: &str) -> Vec<(u32, String)> {
    let wanted = format!("{MARK}={mark}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == wanted.as_bytes()))
        })
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (name, state) = stat.split_once(" (")?.1.rsplit_once(") ")?;
            (!state.starts_with('Z')).then(|| (pid, name.to_owned()))
        })
        .collect()
}

/// Runs the test on the lease that `lease` names (`--etcd URL`, or
/// `--postgres URL`): the first holder's tree holds an independent
/// flock(1) lock on a detector file for as long as any of it lives; its
/// wrapper is SIGKILLed; a second holder, waiting for the lease, tries that
/// lock when it runs and records whether it was taken. Then no process of
/// the first tree may be left.
pub(crate) fn a_killed_wrappers_tree_dies_before_its_lease_lapses(lease: &[&str]) {
    require_flock();
    let dir = Dir::new();
    let detector = dir.path("detector.lock");
    let overlap = dir.path("overlap");
    let mark = s(dir.tmp.path()).to_owned();
    // Every process of the tree inherits flock(1)'s descriptor, and so holds
    // the detector's lock until it exits.
    let work = dir.path("tree.sh");
    std::fs::write(
        &work,
        "sleep 15 & setsid sleep 15 & (setsid sh -c 'sleep 15 &' &)\necho ready\nwait\n",
    )
    .unwrap();
    let holder = format!(
        "flock -n {d} sh {w} || echo holder >> {o}",
        d = s(&detector),
        w = s(&work),
        o = s(&overlap)
    );
    let mut cmd = lockfile();
    cmd.arg("run")
        .args(lease)
        .args(["--ttl", "3", "tree", "sh", "-c", &holder])
        .env(MARK, &mark);
    let (mut wrapper, line) = Background::start(cmd);
    assert_eq!(line, "ready", "{}", wrapper.stderr_so_far());
    // The three sleeps run: the daemon's may come a moment after `ready`.
    wait_until("the holder's three sleeps", || {
        marked(&mark).iter().filter(|(_, n)| n == "sleep").count() == 3
    });
    let tree = marked(&mark);

    wrapper.signal("KILL");
    assert_eq!(wrapper.reap(), -1, "killed by a signal");
    let contender = format!(
        "flock -n {d} true || echo contender >> {o}",
        d = s(&detector),
        o = s(&overlap)
    );
    let out = lockfile()
        .arg("run")
        .args(lease)
        .args(["-w", "30", "tree", "sh", "-c", &contender])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        !overlap.exists(),
        "the second holder ran beside the first's tree ({}): {tree:?} at the kill, {:?} now; the first wrapper's stderr: {}",
        std::fs::read_to_string(&overlap).unwrap_or_default().trim(),
        marked(&mark),
        wrapper.stderr_so_far()
    );
    assert_eq!(marked(&mark), Vec::new(), "the tree at the kill: {tree:?}");
    let err = wrapper.stderr_so_far();
    assert!(
        err.contains("sending SIGKILL to the command and everything it started"),
        "{err}"
    );
}
