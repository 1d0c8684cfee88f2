//! Files planted beside the lock, in a directory that others may write: a
//! FIFO, a symlink to `/dev/zero` or to someone's file, a directory, at each
//! name the command opens besides the lock (the metrics file, its side lock,
//! its temporary file, `inspect --output`). Nothing hangs, COMMAND runs and
//! its status is the wrapper's, one line on stderr names the path, and the
//! planted name is left as it was. Then metrics the command did not write:
//! another user's file, or impossible figures, are not carried forward.

mod common;

use std::os::unix::fs::{MetadataExt as _, symlink};
use std::path::{Path, PathBuf};

use common::{
    Background, BoundedOutput as _, Dir, LOOP, code, lockfile, require_root, run_output, s, stderr,
};

/// Something an attacker leaves at a name.
#[derive(Clone, Copy, Debug)]
enum Plant {
    Fifo,
    /// A symlink to `/dev/zero`: a read that follows it never ends.
    DevZero,
    /// A symlink to a file of the victim's, which must keep its bytes.
    VictimFile,
    Directory,
}

const PLANTS: [Plant; 4] = [
    Plant::Fifo,
    Plant::DevZero,
    Plant::VictimFile,
    Plant::Directory,
];

/// What a victim's file holds before and after.
const VICTIM_BYTES: &[u8] = b"the victim's data\n";

impl Plant {
    /// Plants `self` at `at`; a victim file, if any, goes to `victim`.
    fn plant(self, at: &Path, victim: &Path) {
        match self {
            Plant::Fifo => rustix::fs::mknodat(
                rustix::fs::CWD,
                at,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o666),
                0,
            )
            .unwrap(),
            Plant::DevZero => symlink("/dev/zero", at).unwrap(),
            Plant::VictimFile => {
                std::fs::write(victim, VICTIM_BYTES).unwrap();
                symlink(victim, at).unwrap();
            }
            Plant::Directory => std::fs::create_dir(at).unwrap(),
        }
    }

    /// Fails the test unless `at` (and the victim's file) are as planted.
    fn assert_intact(self, at: &Path, victim: &Path) {
        let meta = std::fs::symlink_metadata(at)
            .unwrap_or_else(|e| panic!("{self:?} at {}: {e}", at.display()));
        let ty = meta.file_type();
        match self {
            Plant::Fifo => {
                use std::os::unix::fs::FileTypeExt as _;
                assert!(ty.is_fifo(), "{self:?} at {} became {ty:?}", at.display());
            }
            Plant::DevZero => {
                assert_eq!(std::fs::read_link(at).unwrap(), Path::new("/dev/zero"));
            }
            Plant::VictimFile => {
                assert_eq!(std::fs::read_link(at).unwrap(), victim);
                assert_eq!(std::fs::read(victim).unwrap(), VICTIM_BYTES);
            }
            Plant::Directory => {
                assert!(ty.is_dir(), "{self:?} at {} became {ty:?}", at.display());
                assert_eq!(std::fs::read_dir(at).unwrap().count(), 0);
            }
        }
    }
}

/// The names beside the lock that `run --metrics-dir MDIR --job backup`
/// opens, by what they are.
#[derive(Clone, Copy, Debug)]
enum MetricsName {
    File,
    SideLock,
    Tmp,
}

impl MetricsName {
    fn in_dir(self, dir: &Path) -> PathBuf {
        dir.join(match self {
            MetricsName::File => "lockfile-backup.prom",
            MetricsName::SideLock => ".lockfile-backup.prom.lck",
            MetricsName::Tmp => ".lockfile-backup.prom.tmp",
        })
    }
}

/// `lockfile run --metrics-dir MDIR --job backup LOCK sh -c SCRIPT`, where
/// SCRIPT creates `marker` and exits with `status`.
fn run_backup(mdir: &Path, lock: &Path, marker: &Path, status: i32) -> std::process::Output {
    let script = format!("touch '{}'; exit {status}", marker.display());
    run_output(&[
        "run",
        "--metrics-dir",
        s(mdir),
        "--job",
        "backup",
        s(lock),
        "sh",
        "-c",
        &script,
    ])
}

#[test]
fn a_planted_name_beside_the_metrics_never_hangs_a_run_nor_changes_its_status() {
    for name in [MetricsName::File, MetricsName::SideLock, MetricsName::Tmp] {
        for plant in PLANTS {
            let dir = Dir::new();
            let mdir = dir.path("metrics");
            std::fs::create_dir(&mdir).unwrap();
            let (lock, marker, victim) =
                (dir.path("backup.lock"), dir.path("ran"), dir.path("victim"));
            let at = name.in_dir(&mdir);
            plant.plant(&at, &victim);

            let out = run_backup(&mdir, &lock, &marker, 3);
            let what = format!("{plant:?} at the metrics {name:?}");
            assert!(marker.exists(), "{what}: COMMAND did not run");
            assert_eq!(code(&out), 3, "{what}: {}", stderr(&out));
            let err = stderr(&out);
            assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
            assert!(err.contains(s(&at)), "{what}: names the path: {err}");
            plant.assert_intact(&at, &victim);
            if !matches!(name, MetricsName::File) {
                assert!(
                    !MetricsName::File.in_dir(&mdir).exists(),
                    "{what}: metrics were written past the planted name"
                );
            }
        }
    }
}

#[test]
fn a_metrics_file_larger_than_any_we_write_is_refused_and_left_alone() {
    let dir = Dir::new();
    let (lock, marker) = (dir.path("backup.lock"), dir.path("ran"));
    let file = MetricsName::File.in_dir(dir.tmp.path());
    let big = vec![b'#'; 2 << 20];
    std::fs::write(&file, &big).unwrap();
    let out = run_backup(dir.tmp.path(), &lock, &marker, 0);
    assert!(marker.exists(), "COMMAND did not run");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(s(&file)) && err.contains("larger"),
        "says why: {err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), big);
}

#[test]
fn a_planted_inspect_output_is_refused_and_left_as_it_was() {
    for plant in PLANTS {
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let out = run_output(&["run", s(&lock), "true"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let (output, victim) = (dir.path("out.prom"), dir.path("victim"));
        plant.plant(&output, &victim);

        let out = lockfile()
            .args(["inspect", "--format", "prometheus", "--output", s(&output)])
            .arg(&lock)
            .bounded_output();
        let err = stderr(&out);
        assert_eq!(code(&out), 3, "{plant:?}: cannot write is unknown: {err}");
        assert_eq!(err.lines().count(), 1, "{plant:?}: one line: {err}");
        assert!(err.contains(s(&output)), "{plant:?}: names the path: {err}");
        plant.assert_intact(&output, &victim);
    }
}
// ---------------------------------------------------------------------------
// Metrics we did not write

/// A metrics file for job `backup` on `lock` with the given figures, as
/// someone else might plant it.
fn planted_figures(lock: &Path, consecutive_failures: &str, last_success: &str) -> String {
    let labels = format!("lockfile_job=\"backup\",lock=\"{}\"", lock.display());
    format!(
        "lockfile_run_running{{{labels}}} 0\n\
         lockfile_run_last_success_timestamp_seconds{{{labels}}} {last_success}\n\
         lockfile_run_consecutive_failures{{{labels}}} {consecutive_failures}\n\
         lockfile_run_outcomes_total{{{labels},outcome=\"failed\"}} 40\n"
    )
}

/// The value of `name` for job `backup` on `lock` (and `outcome`, for the
/// outcome counter) in `file`, if any.
fn figure(file: &Path, name: &str, lock: &Path, outcome: Option<&str>) -> Option<f64> {
    let mut key = format!(
        "{name}{{lockfile_job=\"backup\",lock=\"{}\"",
        lock.display()
    );
    if let Some(outcome) = outcome {
        key.push_str(&format!(",outcome=\"{outcome}\""));
    }
    key.push('}');
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .map(|v| v.trim().parse().unwrap())
}

/// Runs a failing `backup` once over `planted`, and checks that nothing of
/// it was carried forward and that stderr said so once, naming the file.
fn assert_started_anew(dir: &Dir, planted: &Path, lock: &Path) {
    let marker = dir.path("ran");
    let out = run_backup(dir.tmp.path(), lock, &marker, 4);
    assert!(marker.exists(), "COMMAND did not run");
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "said once: {err}");
    assert!(err.contains(s(planted)), "names the path: {err}");
    let f = |name| figure(planted, name, lock, None);
    assert_eq!(f("lockfile_run_consecutive_failures"), Some(1.0));
    assert_eq!(
        f("lockfile_run_last_success_timestamp_seconds").unwrap_or(0.0),
        0.0
    );
    let failed = figure(planted, "lockfile_run_outcomes_total", lock, Some("failed"));
    assert_eq!(failed, Some(1.0));

    // The next run carries our own figures forward, silently.
    let out = run_backup(dir.tmp.path(), lock, &marker, 4);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    assert_eq!(f("lockfile_run_consecutive_failures"), Some(2.0));
}

#[test]
fn impossible_figures_are_not_carried_forward() {
    for (failures, success) in [
        ("-1000000", "99999999999"),
        ("-1000000", "1700000000"),
        ("3", "99999999999"),
        ("NaN", "1700000000"),
        ("2.5", "1700000000"),
    ] {
        let dir = Dir::new();
        let lock = dir.path("backup.lock");
        let file = MetricsName::File.in_dir(dir.tmp.path());
        std::fs::write(&file, planted_figures(&lock, failures, success)).unwrap();
        assert_started_anew(&dir, &file, &lock);
    }
}

#[test]
fn plausible_figures_of_ours_are_carried_forward() {
    let dir = Dir::new();
    let lock = dir.path("backup.lock");
    let file = MetricsName::File.in_dir(dir.tmp.path());
    std::fs::write(&file, planted_figures(&lock, "3", "1700000000")).unwrap();
    let out = run_backup(dir.tmp.path(), &lock, &dir.path("ran"), 4);
    assert_eq!(code(&out), 4);
    assert_eq!(stderr(&out), "");
    let f = |name| figure(&file, name, &lock, None);
    assert_eq!(f("lockfile_run_consecutive_failures"), Some(4.0));
    assert_eq!(
        f("lockfile_run_last_success_timestamp_seconds"),
        Some(1_700_000_000.0)
    );
    let failed = figure(&file, "lockfile_run_outcomes_total", &lock, Some("failed"));
    assert_eq!(failed, Some(41.0));
}

#[test]
#[ignore = "needs root: a metrics file owned by another uid (chown)"]
fn another_users_metrics_file_is_not_carried_forward() {
    require_root("chown a file to another uid");
    let dir = Dir::new();
    // Not sticky: root's rename may replace a file it does not own, as in
    // a textfile dir that root owns and another user was let write to.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let lock = dir.path("backup.lock");
    let file = MetricsName::File.in_dir(dir.tmp.path());
    // Figures that would pass as ours: only the owner gives it away.
    std::fs::write(&file, planted_figures(&lock, "3", "1700000000")).unwrap();
    std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
    assert_started_anew(&dir, &file, &lock);
    assert_eq!(std::fs::metadata(&file).unwrap().uid(), 0);
}

/// Anyone who may create a file in a shared lock directory may name it
/// with bytes that are not UTF-8. `inspect --json` and `reap --json` of the
/// directory still report every file (they crashed, exit 101), and give
/// that path in the documented escaped form, which reads back to its bytes.
#[test]
fn a_file_name_that_is_not_utf8_never_breaks_a_json_report() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = Dir::new();
    let name = std::ffi::OsStr::from_bytes(b"bad\xff\\name.lock");
    std::fs::write(dir.path("ok.lock"), "").unwrap();
    std::fs::write(dir.tmp.path().join(name), "").unwrap();
    let escaped = format!("{}/bad\\xff\\\\name.lock", s(dir.tmp.path()));
    for args in [["inspect", "--json"], ["reap", "--json"]] {
        let out = lockfile().args(args).arg(dir.tmp.path()).bounded_output();
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        let reports: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let reports = reports.as_array().unwrap();
        assert_eq!(reports.len(), 2, "{reports:?}");
        let bad = reports
            .iter()
            .find(|r| r["path_escaped"] == true)
            .unwrap_or_else(|| panic!("{args:?}: {reports:?}"));
        assert_eq!(bad["path"], escaped.as_str(), "{args:?}");
        let ok = reports
            .iter()
            .find(|r| r["path_escaped"].is_null())
            .unwrap();
        assert_eq!(ok["path"], s(&dir.path("ok.lock")), "{args:?}");
    }
}

/// The same name, in the text for a person: every line that names the file
/// gives its bytes as they are, an invalid one as `\xff` (never U+FFFD, which
/// names no file), so that it can be typed back: the inspect table, check,
/// reap, the conflict line of a run, a text event, and an error naming a
/// directory.
#[test]
fn a_file_name_that_is_not_utf8_is_shown_with_its_bytes_in_every_line() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = Dir::new();
    let bad = dir
        .tmp
        .path()
        .join(std::ffi::OsStr::from_bytes(b"bad\xffname.lock"));
    let escaped = format!("{}/bad\\xffname.lock", s(dir.tmp.path()));
    let lossy = |text: &str| text.contains('\u{fffd}');
    let mut holder = lockfile();
    holder
        .arg("run")
        .arg(&bad)
        .args(["sh", "-c", &format!("echo ready; {LOOP}")]);
    let (mut holder, line) = Background::start(holder);
    assert_eq!(line, "ready", "{}", holder.stderr_so_far());

    let out = lockfile()
        .arg("inspect")
        .arg(dir.tmp.path())
        .bounded_output();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains(&format!("{escaped}  held")), "{table}");
    assert!(!lossy(&table), "{table}");

    let out = lockfile()
        .args(["check", "--expect-every", "1h"])
        .arg(&bad)
        .bounded_output();
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.contains(&format!("`{escaped}`")), "{line}");
    assert!(!lossy(&line), "{line}");

    let out = lockfile().arg("reap").arg(dir.tmp.path()).bounded_output();
    let lines = String::from_utf8(out.stdout).unwrap();
    assert!(lines.contains(&format!("  {escaped}  ")), "{lines}");
    assert!(!lossy(&lines), "{lines}");

    let out = lockfile()
        .args(["run", "-n"])
        .arg(&bad)
        .arg("true")
        .bounded_output();
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("`{escaped}` is held by")), "{err}");
    assert!(!lossy(&err), "{err}");

    let out = lockfile()
        .args(["--log-format", "text", "run", "-n"])
        .arg(&bad)
        .arg("true")
        .bounded_output();
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("path={escaped} ")), "{err}");
    assert!(!lossy(&err), "{err}");

    let missing = dir
        .tmp
        .path()
        .join(std::ffi::OsStr::from_bytes(b"no\xffdir/x.lock"));
    let out = lockfile()
        .arg("run")
        .arg(&missing)
        .arg("true")
        .bounded_output();
    let err = stderr(&out);
    let dir_escaped = format!("{}/no\\xffdir", s(dir.tmp.path()));
    assert!(
        err.contains(&format!("the directory `{dir_escaped}` does not exist")),
        "{err}"
    );
    assert!(!lossy(&err), "{err}");

    holder.signal("TERM");
    holder.reap();
}
