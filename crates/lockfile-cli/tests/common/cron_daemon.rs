//! Debian's cron daemon, run for one test and seen by nothing else: it runs
//! in a mount namespace of its own (`unshare --mount`, propagation private),
//! where
//!
//! - `/etc/cron.d` is a directory holding only the test's table, and
//!   `/etc/crontab` and the users' crontabs are empty, so that none of the
//!   system's jobs runs;
//! - `/run` is a fresh tmpfs: cron's pid file cannot clash with a cron the
//!   system runs, and `/run/crond.reboot` is missing, so the table's
//!   `@reboot` jobs run at once rather than at the next minute;
//! - `/usr/sbin` is an overlay whose `sendmail` is a stand-in that records
//!   each message cron would have sent in a file of its own (whether or not
//!   the system has a mail transport).
//!
//! Outside the namespace nothing changes, and the namespace goes with its
//! last process: the guard SIGKILLs cron when dropped, whatever happened.

use std::fs::File;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::{Dir, PATIENCE, s};

/// Cron, running the test's table; SIGKILLed on drop.
pub(crate) struct CronDaemon {
    child: Child,
    mail: PathBuf,
    log: PathBuf,
}

/// The table's name in `/etc/cron.d`: cron ignores names with a dot.
const TABLE: &str = "lockfile-test";

impl CronDaemon {
    /// Starts cron on `table` (in `/etc/cron.d`'s format: a user field
    /// after the schedule), its files under `dir`.
    pub(crate) fn start(dir: &Dir, table: &str) -> CronDaemon {
        assert!(
            Path::new("/usr/sbin/cron").exists(),
            "this test needs Debian's cron (apt-get install cron)"
        );
        let root = dir.path("cron");
        let [crond, spool, mail, overlay] =
            ["cron.d", "crontabs", "mail", "overlay"].map(|name| root.join(name));
        for d in [&crond, &spool, &mail, &overlay] {
            std::fs::create_dir_all(d).unwrap();
        }
        // cron reads a table only if root owns it and nobody else may write
        // it; the test runs as root.
        let write = |path: &Path, text: &str, mode: u32| {
            std::fs::write(path, text).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write(&crond.join(TABLE), table, 0o644);
        let crontab = root.join("crontab");
        write(&crontab, "", 0o644);
        let sendmail = root.join("sendmail");
        write(
            &sendmail,
            &format!(
                "#!/bin/sh\n\
                 # What cron would have sent: each message whole, in a file of its own.\n\
                 part=$(mktemp '{}/part.XXXXXX')\n\
                 cat > \"$part\"\n\
                 mv \"$part\" \"$part.mail\"\n",
                s(&mail)
            ),
            0o755,
        );
        let setup = format!(
            "set -e\n\
             mount -t tmpfs -o mode=0755 lockfile-test-run /run\n\
             mount -t tmpfs lockfile-test-sbin '{o}'\n\
             mkdir '{o}/upper' '{o}/work'\n\
             mount -t overlay lockfile-test-sbin -o 'lowerdir=/usr/sbin,upperdir={o}/upper,workdir={o}/work' /usr/sbin\n\
             rm -f /usr/sbin/sendmail\n\
             cp '{sendmail}' /usr/sbin/sendmail\n\
             mount --bind '{crond}' /etc/cron.d\n\
             mount --bind '{crontab}' /etc/crontab\n\
             mount --bind '{spool}' /var/spool/cron/crontabs\n\
             exec /usr/sbin/cron -f -L 15\n",
            o = s(&overlay),
            sendmail = s(&sendmail),
            crond = s(&crond),
            crontab = s(&crontab),
            spool = s(&spool),
        );
        let log = root.join("cron.log");
        let out = File::create(&log).unwrap();
        // Without --fork, unshare execs the shell, which execs cron: the
        // child is cron itself.
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg(setup)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("unshare (util-linux)");
        CronDaemon { child, mail, log }
    }

    /// What cron wrote (its setup's errors, and with `-f` its log).
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Every message cron sent so far, whole, in the order of their names.
    pub(crate) fn mails(&self) -> Vec<String> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&self.mail)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|ext| ext == "mail"))
            .collect();
        names.sort();
        names
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect()
    }

    /// Waits until `started` holds of the mails (a sign that every job of
    /// the table has started) and cron has no live child left: each job's
    /// cron process ends only once its job did and its mail, if any, was
    /// sent. Fails the test with cron's log after [`PATIENCE`], or at once
    /// if cron exited.
    pub(crate) fn wait_until_done(&mut self, started: impl Fn(&[String]) -> bool) {
        let begun = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("cron exited ({status}): {}", self.log());
            }
            if started(&self.mails()) && live_children(self.child.id()) == 0 {
                return;
            }
            assert!(
                begun.elapsed() < PATIENCE,
                "cron's jobs did not end within {PATIENCE:?}; mails {:?}; log: {}",
                self.mails(),
                self.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for CronDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many children of `parent` are alive (not zombies).
fn live_children(parent: u32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // The state and the ppid: the third and fourth fields of
            // /proc/PID/stat, after the parenthesised name.
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some(close) = stat.rfind(')') else {
                return false;
            };
            let mut fields = stat[close + 1..].split_whitespace();
            let (state, ppid) = (fields.next(), fields.next());
            ppid.and_then(|p| p.parse::<u32>().ok()) == Some(parent) && state != Some("Z")
        })
        .count()
}
