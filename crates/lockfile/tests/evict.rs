//! Evicting a hung holder (`LockOptions::evict_after`): real holders, real
//! signals. A holder that broke its own heartbeat promise is stopped with
//! everything it started and the lock taken; every other holder is left
//! alone, and the error says why.
//!
//! Silence is made by setting the lock file's modification time into the
//! past (what a holder that stopped beating looks like), except where the
//! test is about waiting for a promise to break.

use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use lockfile::error::EvictionRefused;
use lockfile::history::{Outcome, RunEnd};
use lockfile::{Error, LockGuard, LockOptions, LockState};

use crate::support::{
    ATTACKER, ChildHolder, VICTIM, as_user, lock_path, require_flock, require_root, tempdir,
};

/// Makes the holder's heartbeat look `ago` old.
fn silence(path: &Path, ago: Duration) {
    File::open(path)
        .unwrap()
        .set_modified(SystemTime::now() - ago)
        .unwrap();
}

/// Options that evict a holder silent for longer than `evict_after`, and
/// give it 200 ms between SIGTERM and SIGKILL.
fn evicting(evict_after: Duration) -> LockOptions {
    let mut opts = LockOptions::new();
    opts.job("evictor")
        .evict_after(evict_after)
        .kill_after(Duration::from_millis(200));
    opts
}

/// The error of a `try_acquire` that would evict a holder silent for 1 s,
/// and must not.
#[track_caller]
fn refusal(path: &Path) -> Error {
    evicting(Duration::from_secs(1))
        .try_acquire(path)
        .unwrap_err()
}

/// The reason an eviction was refused, from a contention error.
fn refused(err: &Error) -> &EvictionRefused {
    assert!(err.is_contended(), "{err:?}");
    err.not_evicted()
        .unwrap_or_else(|| panic!("no reason why it did not evict: {err:?}"))
}

/// Whether `pid` has exited: no such process, or a zombie.
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat.rsplit_once(')').unwrap().1.split_whitespace().next();
            matches!(state, Some("Z" | "X"))
        }
    }
}

/// The start time (clock ticks since boot) of a live process.
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[19].parse().unwrap()
}

/// Rewrites fields of the owner record in the lock file, as a forger would.
fn forge(path: &Path, fields: &[(&str, serde_json::Value)]) {
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    for (key, value) in fields {
        doc["owner"][*key] = value.clone();
    }
    std::fs::write(path, serde_json::to_vec(&doc).unwrap()).unwrap();
}

/// A process that has nothing to do with any lock.
fn bystander() -> Child {
    Command::new("sleep").arg("60").spawn().unwrap()
}

#[test]
fn a_library_holder_that_stopped_beating_is_evicted_with_its_tree() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    // A history to count on: one failed run before.
    let mut earlier = LockGuard::try_acquire(&path).unwrap();
    earlier
        .record_outcome(RunEnd {
            outcome: Outcome::Failed,
            exit_code: Some(1),
            signal: None,
            started_at: SystemTime::now(),
        })
        .unwrap();
    earlier.release().unwrap();

    let (mut holder, token, tree_pid) = ChildHolder::hold_silent(&path, 1000, "none", None, true);
    let holder_pid = holder.pid();
    silence(&path, Duration::from_secs(5));

    let guard = evicting(Duration::from_secs(1))
        .try_acquire(&path)
        .expect("the hung holder is evicted");

    // Everything that held the lock is gone: the holder, and the process
    // that called setsid and ignored SIGTERM (it took the SIGKILL).
    let status = holder.child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert!(gone(tree_pid), "pid {tree_pid} outlived the eviction");

    let evicted = guard.evicted().expect("the guard says what it evicted");
    assert_eq!(evicted.pid, holder_pid);
    assert_eq!(evicted.token.to_string(), token);
    assert_eq!(evicted.job.as_deref(), Some("silent"));
    assert!(evicted.silent() > Duration::from_secs(1), "{evicted:?}");

    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    let owner = report.owner.as_ref().unwrap();
    assert_eq!(owner.pid, std::process::id());
    assert_eq!(owner.evicted.as_deref(), Some(evicted));
    let run = report.last_run.as_ref().unwrap();
    assert_eq!(run.outcome, Outcome::Evicted);
    assert_eq!(
        run.consecutive_failures, 2,
        "the failure before, and this one"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["last_run"]["outcome"], "evicted");
    let shown = &json["owner"]["evicted"];
    assert_eq!(shown["pid"], holder_pid);
    assert_eq!(shown["token"], token);
    assert_eq!(shown["job"], "silent");
    assert!(shown["silent_seconds"].as_f64().unwrap() > 1.0, "{shown}");
    guard.release().unwrap();
}

#[test]
fn a_contender_that_arrives_early_waits_and_evicts_once_the_promise_is_broken() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, token, _) = ChildHolder::hold_silent(&path, 1000, "none", None, false);

    // Fresh (it just beat): not evicted at the attempt.
    silence(&path, Duration::ZERO);
    let err = evicting(Duration::from_millis(500))
        .try_acquire(&path)
        .unwrap_err();
    assert!(
        matches!(
            refused(&err),
            EvictionRefused::NotSilentLongEnough { threshold, .. }
                if *threshold == Duration::from_secs(1)
        ),
        "{err:?}"
    );
    assert!(holder.running());

    // A waiting contender judges again once the promise would be broken.
    let guard = evicting(Duration::from_millis(500))
        .timeout(Duration::from_secs(60))
        .acquire(&path)
        .expect("evicted once its promise was broken");
    assert_eq!(guard.evicted().unwrap().token.to_string(), token);
    assert!(!holder.running());
    guard.release().unwrap();
}

#[test]
fn a_stopped_holder_is_continued_so_that_it_dies_of_sigterm() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _, _) = ChildHolder::hold_silent(&path, 1000, "none", None, false);
    let status = Command::new("kill")
        .args(["-STOP", &holder.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    silence(&path, Duration::from_secs(5));

    // A long grace: only SIGTERM, acted on once SIGCONT came, can end it in time.
    let guard = LockOptions::new()
        .evict_after(Duration::from_secs(1))
        .kill_after(Duration::from_secs(3600))
        .timeout(Duration::from_secs(3600))
        .acquire(&path)
        .expect("evicted");
    let status = holder.child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    let run = guard.last_run().unwrap();
    assert_eq!(run.signal, Some(libc::SIGTERM));
    assert_eq!(run.consecutive_failures, 1);
}

#[test]
fn a_holder_within_its_promise_is_not_evicted() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _, _) = ChildHolder::hold_silent(&path, 60_000, "none", None, false);
    silence(&path, Duration::from_secs(30));

    let err = refusal(&path);
    assert!(matches!(err, Error::Contended { .. }), "{err:?}");
    match refused(&err) {
        EvictionRefused::NotSilentLongEnough { silent, threshold } => {
            assert_eq!(*threshold, Duration::from_secs(60));
            assert!(silent < threshold);
        }
        other => panic!("{other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains("not evicted"), "{message}");
    assert!(holder.running());

    // A bounded wait that ends first says the same, as a timeout.
    let err = evicting(Duration::from_secs(1))
        .timeout(Duration::from_millis(300))
        .acquire(&path)
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(matches!(
        refused(&err),
        EvictionRefused::NotSilentLongEnough { .. }
    ));
    assert!(holder.running());
}

#[test]
fn a_watchdog_holder_gets_its_kill_after_before_it_is_evicted() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _, _) = ChildHolder::hold_silent(&path, 1000, "command", Some(60_000), false);
    // Past its promise, but not past its promise plus its kill-after.
    silence(&path, Duration::from_secs(5));
    let err = refusal(&path);
    assert!(
        matches!(
            refused(&err),
            EvictionRefused::NotSilentLongEnough { threshold, .. }
                if *threshold == Duration::from_secs(61)
        ),
        "{err:?}"
    );
    assert!(holder.running());

    silence(&path, Duration::from_secs(120));
    let guard = evicting(Duration::from_secs(1))
        .try_acquire(&path)
        .expect("past its promise and its kill-after");
    assert!(guard.evicted().is_some());
    assert!(!holder.running());
}

#[test]
fn a_wrapper_kept_heartbeat_is_never_evicted() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _, _) = ChildHolder::hold_silent(&path, 1000, "wrapper", None, false);
    silence(&path, Duration::from_secs(3600));
    let err = refusal(&path);
    assert!(
        matches!(refused(&err), EvictionRefused::WrapperHeartbeat),
        "{err:?}"
    );
    assert!(holder.running());
}

#[test]
fn a_holder_that_promised_nothing_is_never_evicted() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _, _) = ChildHolder::hold_silent(&path, 1000, "none", None, false);
    forge(&path, &[("heartbeat_interval_ms", serde_json::Value::Null)]);
    silence(&path, Duration::from_secs(3600));
    let err = refusal(&path);
    assert!(
        matches!(refused(&err), EvictionRefused::NoPromise),
        "{err:?}"
    );
    assert!(holder.running());
}

#[test]
fn a_flock_1_holder_is_never_evicted() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut flock = Command::new("flock")
        .arg(&path)
        .args(["sleep", "60"])
        .process_group(0)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    while !lockfile::inspect(&path).is_ok_and(|r| r.state == LockState::Held) {
        assert!(flock.try_wait().unwrap().is_none(), "flock(1) exited early");
        std::thread::sleep(Duration::from_millis(5));
    }
    silence(&path, Duration::from_secs(3600));

    let err = evicting(Duration::from_millis(1))
        .try_acquire(&path)
        .unwrap_err();
    assert!(
        matches!(refused(&err), EvictionRefused::NoRecord),
        "{err:?}"
    );
    let plain = LockGuard::try_acquire(&path).unwrap_err();
    assert_ne!(
        err.to_string(),
        plain.to_string(),
        "says why, unlike a plain conflict"
    );
    assert!(
        flock.try_wait().unwrap().is_none(),
        "flock(1) was signalled"
    );

    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", flock.id())])
        .status();
    flock.wait().unwrap();
}

#[test]
fn a_record_from_another_host_or_boot_is_never_evicted() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _, _) = ChildHolder::hold_silent(&path, 1000, "none", None, false);

    forge(&path, &[("hostname", "elsewhere.example".into())]);
    silence(&path, Duration::from_secs(3600));
    let err = refusal(&path);
    assert!(
        matches!(refused(&err), EvictionRefused::OtherHost { host } if host == "elsewhere.example"),
        "{err:?}"
    );
    assert!(holder.running());

    let host = lockfile::inspect(&path).unwrap().owner.unwrap().hostname;
    forge(
        &path,
        &[
            ("hostname", local_hostname().into()),
            ("boot_id", "00000000-0000-4000-8000-000000000000".into()),
        ],
    );
    assert_ne!(&*host, local_hostname());
    silence(&path, Duration::from_secs(3600));
    let err = refusal(&path);
    assert!(
        matches!(refused(&err), EvictionRefused::OtherBoot { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("another boot"), "{err}");
    assert!(holder.running());
}

fn local_hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_recorded_pid_that_now_belongs_to_another_process_is_never_signalled() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _, _) = ChildHolder::hold_silent(&path, 1000, "none", None, false);
    let mut unrelated = bystander();
    let pid = unrelated.id();

    // Its start time is not the owner's: a reused PID.
    forge(
        &path,
        &[
            ("pid", pid.into()),
            ("start_time", (start_time(pid) + 1).into()),
        ],
    );
    silence(&path, Duration::from_secs(3600));
    let err = refusal(&path);
    assert!(
        matches!(refused(&err), EvictionRefused::PidReused { pid: p, .. } if *p == pid),
        "{err:?}"
    );

    // Even with a matching start time, it holds no lock, nor does its tree:
    // the process that holds the lock is none of its own.
    forge(&path, &[("start_time", start_time(pid).into())]);
    silence(&path, Duration::from_secs(3600));
    let err = refusal(&path);
    assert!(
        matches!(refused(&err), EvictionRefused::UnrelatedHolder { pid: p } if *p == holder.pid()),
        "{err:?}"
    );

    assert!(
        unrelated.try_wait().unwrap().is_none(),
        "the bystander was signalled"
    );
    assert!(holder.running());
    unrelated.kill().unwrap();
    unrelated.wait().unwrap();
}

#[test]
fn a_holder_in_this_very_process_is_never_evicted() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let held = LockOptions::new()
        .heartbeat_interval(Duration::from_millis(100))
        .try_acquire(&path)
        .unwrap();
    silence(&path, Duration::from_secs(3600));
    let err = evicting(Duration::from_millis(1))
        .try_acquire(&path)
        .unwrap_err();
    assert!(
        matches!(refused(&err), EvictionRefused::WouldStopItself),
        "{err:?}"
    );
    held.release().unwrap();
}

#[test]
#[ignore = "needs root: runs the evictor as another user (setpriv)"]
fn a_holder_of_another_user_is_not_stopped_by_an_unprivileged_evictor() {
    require_root("setpriv to an unprivileged uid");
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    // Let the unprivileged evictor open the file.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(&path, b"").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (mut holder, _, _) = ChildHolder::hold_silent(&path, 1000, "none", None, false);
    silence(&path, Duration::from_secs(3600));

    let mut evictor = ChildHolder::spawn_under(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
        &format!("try-evict\t{}\t1000", path.display()),
    );
    let outcome = evictor.expect_line("outcome ");
    assert!(
        outcome.contains("OtherUser") && outcome.contains("uid: Some(0)"),
        "{outcome}"
    );
    assert!(holder.running());
}

#[test]
#[ignore = "needs root: a PID namespace (unshare --pid)"]
fn a_holder_in_a_pid_namespace_is_resolved_and_evicted() {
    require_root("unshare --pid");
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (holder, token, _) = ChildHolder::hold_silent_under(
        &["unshare", "--pid", "--fork", "--kill-child"],
        &path,
        1000,
        "none",
        None,
        false,
    );
    let report = lockfile::inspect(&path).unwrap();
    let host_pid = report.holders[0].pid;
    assert_ne!(
        report.owner.unwrap().pid,
        host_pid,
        "recorded inside its namespace"
    );
    silence(&path, Duration::from_secs(3600));

    // The namespace's init ignores SIGTERM from outside: it takes the SIGKILL.
    let guard = evicting(Duration::from_secs(1))
        .try_acquire(&path)
        .expect("resolved through its namespace, and evicted");
    assert_eq!(guard.evicted().unwrap().token.to_string(), token);
    assert!(gone(host_pid));
    holder.wait();
    let run = lockfile::inspect(&path).unwrap().last_run.unwrap();
    assert_eq!(run.outcome, Outcome::Evicted);
    assert_eq!(run.signal, Some(libc::SIGKILL));
}

/// A process left running by a test, SIGKILLed when the test ends.
struct Stray(u32);

impl Drop for Stray {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.0 as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

/// The parent PID of a live process.
fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[1].parse().unwrap()
}

/// Asserts that `pid` holds the lock on `path` through a descriptor of its
/// own (its fdinfo lists the flock): the precondition that makes a refusal
/// below mean something. `inspect` names only the process that took it.
#[track_caller]
fn assert_holds(path: &Path, pid: u32) {
    use std::os::unix::fs::MetadataExt;
    let lock = std::fs::metadata(path).unwrap();
    let holds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(Result::ok)
        .any(|fd| {
            let same = std::fs::metadata(fd.path())
                .is_ok_and(|m| m.dev() == lock.dev() && m.ino() == lock.ino());
            let info = format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy());
            same && std::fs::read_to_string(info).is_ok_and(|i| i.contains("FLOCK"))
        });
    assert!(
        holds,
        "pid {pid} should hold the lock on {}",
        path.display()
    );
}

#[test]
fn a_daemon_that_left_the_owners_tree_with_its_descriptor_is_never_signalled() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _, daemon) =
        ChildHolder::hold_silent_sharing(&[], &path, 1000, "none", None, "daemon");
    let _stray = Stray(daemon);
    assert_ne!(parent_of(daemon), holder.pid(), "the daemon left the tree");
    assert_holds(&path, daemon);
    silence(&path, Duration::from_secs(3600));

    let err = refusal(&path);
    assert!(
        matches!(refused(&err), EvictionRefused::UnrelatedHolder { pid } if *pid == daemon),
        "{err:?}"
    );
    assert!(holder.running());
    assert!(!gone(daemon), "the daemon was signalled");
}

#[test]
#[ignore = "needs root: plays an attacker and a victim of two other uids (setpriv)"]
fn a_descriptor_passed_to_another_users_daemon_never_gets_that_daemon_signalled() {
    use std::os::unix::fs::PermissionsExt;
    require_root("setpriv to two unprivileged uids");
    let dir = tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A sticky directory open to all that the attacker owns (her own
    // ~/shared): her files in it are not planted by the kernel's rule, so
    // the eviction rule alone stands between her record and root's signals.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::os::unix::fs::chown(&shared, Some(ATTACKER), Some(ATTACKER)).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let path = shared.join("job.lock");
    let socket = shared.join("victim.sock");

    let mut victim = ChildHolder::spawn_under(
        as_user(VICTIM),
        &format!("victim-daemon\t{}", socket.display()),
    );
    victim.expect_line("listening");
    let mut attacker = ChildHolder::spawn_under(
        as_user(ATTACKER),
        &format!("attack-pass\t{}\t{}", path.display(), socket.display()),
    );
    attacker.expect_line("ready ");
    let worker: u32 = victim
        .expect_line("ready ")
        .trim_start_matches("ready ")
        .parse()
        .unwrap();
    let _worker = Stray(worker);
    assert_holds(&path, victim.pid());

    let err = evicting(Duration::from_secs(1))
        .try_acquire(&path)
        .unwrap_err();
    assert!(
        matches!(refused(&err), EvictionRefused::UnrelatedHolder { pid } if *pid == victim.pid()),
        "{err:?}"
    );
    assert!(err.to_string().contains("not evicted"), "{err}");
    assert!(victim.running(), "the victim's daemon was signalled");
    assert!(!gone(worker), "the victim's worker was signalled");
    assert!(attacker.running(), "nothing at all is signalled");
}

#[test]
#[ignore = "needs root: a holder whose child runs as another uid (setpriv)"]
fn a_tree_of_mixed_users_is_never_signalled_even_by_root() {
    require_root("setpriv to an unprivileged uid");
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _, child) =
        ChildHolder::hold_silent_sharing(&[], &path, 1000, "none", None, "other-uid");
    let _stray = Stray(child);
    assert_holds(&path, child);
    silence(&path, Duration::from_secs(3600));

    let err = refusal(&path);
    assert!(
        matches!(
            refused(&err),
            EvictionRefused::MixedUids { pid, uids: Some((65534, 65534)), owner: Some(0) }
                if *pid == child
        ),
        "{err:?}"
    );
    assert!(holder.running());
    assert!(!gone(child), "the other user's process was signalled");
}

#[test]
#[ignore = "needs root: a lock file owned by another uid"]
fn root_never_evicts_from_a_file_of_another_user_than_the_holders() {
    require_root("chown");
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _, _) = ChildHolder::hold_silent(&path, 1000, "none", None, false);
    std::os::unix::fs::chown(&path, Some(ATTACKER), Some(ATTACKER)).unwrap();
    silence(&path, Duration::from_secs(3600));

    let err = refusal(&path);
    assert!(
        matches!(
            refused(&err),
            EvictionRefused::FileOfAnotherUser {
                file_uid: ATTACKER,
                owner_uid: 0
            }
        ),
        "{err:?}"
    );
    assert!(holder.running());
}
