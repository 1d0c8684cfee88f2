//! What cron users put around a lock: `--jitter`, a delay stable for a host
//! and a job; `--output-on-failure`, output only when a run fails, also
//! under a real cron daemon.

mod common;

use std::io::{BufRead as _, BufReader, Read as _, Seek as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Output, Stdio};

use common::cron_daemon::CronDaemon;
use common::{
    Background, BoundedOutput, Dir, LOOP, code, lockfile, require_root, s, signal, stderr,
    wait_within_patience,
};

/// The delay `lockfile run --verbose --jitter JITTER` says it waits, for
/// `seed` (None: this host's own), and the run's exit status.
fn jitter(seed: Option<&str>, jitter: &str, lock: &std::path::Path) -> (String, i32) {
    let mut cmd = lockfile();
    cmd.args([
        "run",
        "--verbose",
        "--jitter",
        jitter,
        "--job",
        "backup",
        "-n",
        s(lock),
        "true",
    ]);
    match seed {
        Some(seed) => cmd.env("LOCKFILE_JITTER_SEED", seed),
        None => cmd.env_remove("LOCKFILE_JITTER_SEED"),
    };
    let out = cmd.bounded_output();
    let said = stderr(&out);
    let waiting = said
        .lines()
        .find_map(|l| l.strip_prefix(&format!("lockfile: --jitter {jitter}: waiting ")))
        .unwrap_or_else(|| panic!("no jitter line: {said}"))
        .to_owned();
    (waiting, code(&out))
}

#[test]
fn the_jitter_is_the_same_on_every_run_of_a_host_and_differs_across_hosts() {
    let dir = Dir::new();
    let lock = dir.path("backup.lock");
    let (first, status) = jitter(Some("host-a"), "200ms", &lock);
    assert_eq!(status, 0);
    for _ in 0..2 {
        assert_eq!(jitter(Some("host-a"), "200ms", &lock).0, first);
    }
    let hosts: std::collections::BTreeSet<String> = (0..8)
        .map(|host| jitter(Some(&format!("host-{host}")), "200ms", &lock).0)
        .collect();
    assert!(
        hosts.len() > 4,
        "eight hosts, {} delays: {hosts:?}",
        hosts.len()
    );
    // This host's own (its machine id, or its hostname): stable too.
    let own = jitter(None, "200ms", &lock).0;
    assert_eq!(jitter(None, "200ms", &lock).0, own);
}

#[test]
fn a_jitter_of_half_the_period_or_more_is_a_usage_error_and_takes_nothing() {
    let dir = Dir::new();
    let lock = dir.path("tick.lock");
    let out = lockfile()
        .args([
            "run",
            "--once-per",
            "1m",
            "--jitter",
            "30s",
            s(&lock),
            "true",
        ])
        .bounded_output();
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("--jitter 30s") && said.contains("--once-per 1m"),
        "{said}"
    );
    assert!(!lock.exists());
    // Less is taken. A period of a day leaves a run that starts near its
    // half-period edge no chance to pass it in the 100 ms (which one near a
    // minute's would have: its tick is then refused as too late).
    let out = lockfile()
        .args([
            "run",
            "--once-per",
            "1d",
            "--jitter",
            "100ms",
            s(&lock),
            "true",
        ])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn sigterm_during_the_jitter_ends_the_run_before_it_takes_or_writes_anything() {
    let dir = Dir::new();
    let lock = dir.path("backup.lock");
    let metrics = dir.path("metrics");
    std::fs::create_dir(&metrics).unwrap();
    // Killed on drop, so that a failure leaves no run sleeping for an hour.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = lockfile()
        .args([
            "run",
            "--verbose",
            "--jitter",
            "1h",
            "--job",
            "backup",
            "--metrics-dir",
            s(&metrics),
        ])
        .args([s(&lock), "true"])
        .env("LOCKFILE_JITTER_SEED", "a")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut child = Killed(child);
    let seconds: f64 = line
        .trim()
        .strip_prefix("lockfile: --jitter 1h: waiting ")
        .and_then(|rest| rest.strip_suffix("s before taking the lock"))
        .unwrap_or_else(|| panic!("{line}"))
        .parse()
        .unwrap();
    assert!(seconds > 60.0, "this seed waits {seconds}s");
    signal(child.0.id(), "TERM");
    let status = wait_within_patience(&mut child.0).expect("the run ends on SIGTERM");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status}");
    assert!(!lock.exists(), "the lock file was created");
    assert_eq!(
        std::fs::read_dir(&metrics).unwrap().count(),
        0,
        "metrics were written"
    );
}

// ---------------------------------------------------------------------------
// --output-on-failure

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `lockfile run --output-on-failure EXTRA LOCK sh -c SCRIPT`, stdout and
/// stderr apart.
fn keeping(lock: &Path, extra: &[&str], script: &str) -> Output {
    lockfile()
        .args(["run", "--output-on-failure"])
        .args(extra)
        .args([s(lock), "sh", "-c", script])
        .bounded_output()
}

const BOTH_STREAMS: &str = "echo out 1; echo err 1 >&2; echo out 2; echo err 2 >&2";

#[test]
fn a_failing_job_prints_each_stream_to_its_own_descriptor_after_our_line() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let out = keeping(
        &lock,
        &["--job", "backup"],
        &format!("{BOTH_STREAMS}; exit 3"),
    );
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert_eq!(stdout(&out), "out 1\nout 2\n");
    assert_eq!(
        stderr(&out),
        "lockfile: the run of job \"backup\" failed (exit status 3); its output follows\nerr 1\nerr 2\n"
    );
    // Killed by a signal: a failure too.
    let out = keeping(&lock, &["--job", "backup"], "echo dying; kill -KILL $$");
    assert_eq!(code(&out), 137, "{}", stderr(&out));
    assert_eq!(stdout(&out), "dying\n");
    assert!(
        stderr(&out).contains("failed (exit status 137, killed by signal 9)"),
        "{}",
        stderr(&out)
    );
    // Nothing written: the line says so.
    let out = keeping(&lock, &[], "exit 1");
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).ends_with("failed (exit status 1); it wrote no output\n"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn when_stdout_and_stderr_are_one_file_their_order_is_kept_exactly() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    // As under cron, whose mail is one pipe for both.
    let mut both = tempfile::tempfile().unwrap();
    let status = lockfile()
        .args(["run", "--output-on-failure", "--job", "backup", s(&lock)])
        .args(["sh", "-c", &format!("{BOTH_STREAMS}; exit 2")])
        .stdin(Stdio::null())
        .stdout(both.try_clone().unwrap())
        .stderr(both.try_clone().unwrap())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
    let mut seen = String::new();
    both.rewind().unwrap();
    both.read_to_string(&mut seen).unwrap();
    assert_eq!(
        seen,
        "lockfile: the run of job \"backup\" failed (exit status 2); its output follows\nout 1\nerr 1\nout 2\nerr 2\n"
    );
}

#[test]
fn a_succeeding_job_prints_nothing() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let out = keeping(&lock, &[], BOTH_STREAMS);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert_eq!(stderr(&out), "");
}

#[test]
fn a_job_stopped_by_a_limit_is_reported_as_such_with_its_output() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    // COMMAND would run for a minute: only the limit ends it.
    let script = format!("echo started; echo working >&2; {LOOP}");
    let out = keeping(&lock, &["--max-runtime", "1", "--kill-after", "5"], &script);
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    assert_eq!(stdout(&out), "started\n");
    let said = stderr(&out);
    let (ours, rest) = said.split_once('\n').unwrap();
    assert!(
        ours.contains("ran past its maximum runtime and was stopped (exit status 124"),
        "{said}"
    );
    // Our line about the limit went with COMMAND's stderr, in order.
    assert!(rest.starts_with("working\n"), "{said}");
    assert!(rest.contains("reached its maximum runtime of 1s"), "{said}");

    let out = keeping(&lock, &["--watchdog", "1", "--kill-after", "5"], &script);
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    assert_eq!(stdout(&out), "started\n");
    assert!(
        stderr(&out).contains("stopped proving progress and was stopped (exit status 124"),
        "{}",
        stderr(&out)
    );
}

/// What `--output-on-failure` prints of a stream of `n` bytes that it cut,
/// keeping `head` and `tail`.
fn cut_line(n: u64, head: u64, tail: u64) -> String {
    format!(
        "lockfile: {} bytes of output cut here; the first {head} and the last {tail} are kept\n",
        n - head - tail
    )
}

#[test]
fn a_job_writing_more_than_the_limit_keeps_the_head_and_the_tail_and_says_how_much_was_cut() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    // 10,000 numbered lines on stdout, and a short stderr.
    let out = keeping(
        &lock,
        &["--output-limit", "1030"],
        "seq 1 10000; echo short >&2; exit 1",
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let whole: String = (1..=10_000).map(|i| format!("{i}\n")).collect();
    let printed = stdout(&out);
    let line = cut_line(whole.len() as u64, 515, 515);
    let (head, tail) = printed
        .split_once(&line)
        .unwrap_or_else(|| panic!("no `{line}` in {printed}"));
    // The head ends inside a line: the cut line starts on a line of its own.
    assert!(!whole[..515].ends_with('\n'));
    assert_eq!(head, format!("{}\n", &whole[..515]));
    assert_eq!(tail, &whole[whole.len() - 515..]);
    assert!(
        stderr(&out).ends_with("its output follows\nshort\n"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_default_limit_is_16_mib_a_stream_kept_in_a_file_that_no_name_points_to() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let tmp = dir.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // 17 MiB of `a`, then a last line: past the 1 MiB kept in memory.
    let n: u64 = 17 << 20;
    let out = lockfile()
        .args(["run", "--output-on-failure", s(&lock), "sh", "-c"])
        .arg(format!(
            "head -c {} /dev/zero | tr '\\0' a; echo; echo the end; exit 1",
            n
        ))
        .env("TMPDIR", &tmp)
        .bounded_output();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let whole = n + "\nthe end\n".len() as u64;
    let half = 8 << 20;
    let line = cut_line(whole, half, half);
    let printed = &out.stdout;
    assert_eq!(printed.len() as u64, 2 * half + 1 + line.len() as u64);
    assert!(printed[..half as usize].iter().all(|&b| b == b'a'));
    assert_eq!(
        std::str::from_utf8(&printed[half as usize..half as usize + 1 + line.len()]).unwrap(),
        format!("\n{line}")
    );
    assert!(printed.ends_with(b"aaaa\nthe end\n"));
    // The temporary file had no name, or lost it at once.
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}

#[test]
fn a_skip_prints_its_usual_line_and_quiet_skips_stay_quiet() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let (mut holder, _) =
        Background::spawn(&[s(&lock), "sh", "-c", &format!("echo ready; {LOOP}")]);
    let out = keeping(&lock, &["-n"], "echo never");
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    let said = stderr(&out);
    assert!(
        said.starts_with("lockfile: `") && said.contains("is held by pid"),
        "{said}"
    );
    assert_eq!(said.lines().count(), 1, "{said}");
    let out = keeping(&lock, &["-n", "-q"], "echo never");
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!((stdout(&out), stderr(&out)), (String::new(), String::new()));
    holder.signal("TERM");
    holder.reap();
}

#[test]
fn a_background_process_holding_the_output_does_not_hold_the_run() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let pid_file = dir.path("pid");
    // Killed on drop: the process left behind would live for two minutes.
    struct Kill(std::path::PathBuf);
    impl Drop for Kill {
        fn drop(&mut self) {
            if let Some(pid) = std::fs::read_to_string(&self.0)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            {
                // SAFETY: kill(2) takes plain integers.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
    let _kill = Kill(pid_file.clone());
    // Longer than the test's patience: a run that waited for it would
    // fail the test rather than pass late.
    let script = format!(
        "sleep 120 & echo $! > '{}'; echo before; exit 4",
        pid_file.display()
    );
    let out = keeping(&lock, &[], &script);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert_eq!(stdout(&out), "before\n");
}

// ---------------------------------------------------------------------------
// Under a real cron daemon

#[test]
#[ignore = "needs root: Debian's cron in a private mount namespace (unshare -m) with a stand-in for /usr/sbin/sendmail"]
fn under_cron_a_failing_job_mails_its_output_and_our_line_and_a_succeeding_one_mails_nothing() {
    require_root("Debian's cron, in a mount namespace of its own");
    let dir = Dir::new();
    let lockfile = env!("CARGO_BIN_EXE_lockfile");
    let ok_ran = dir.path("ok-ran");
    // @reboot jobs run once as cron starts: no minute to wait for. The
    // succeeding job's line ends by leaving a mark, so that the test knows
    // it ran.
    let table = format!(
        "MAILTO=root\n\
         @reboot root {lockfile} run --output-on-failure --job failing {} sh -c 'echo to stdout; echo to stderr >&2; exit 3'\n\
         @reboot root {lockfile} run --output-on-failure --job succeeding {} sh -c 'echo noise; echo noise >&2' && touch {}\n",
        s(&dir.path("failing.lock")),
        s(&dir.path("succeeding.lock")),
        s(&ok_ran),
    );
    let mut cron = CronDaemon::start(&dir, &table);
    cron.wait_until_done(|mails| ok_ran.exists() && !mails.is_empty());
    let mails = cron.mails();
    assert_eq!(mails.len(), 1, "{mails:#?}\n{}", cron.log());
    let mail = &mails[0];
    assert!(mail.contains("Subject: Cron <root@"), "{mail}");
    assert!(mail.contains("--job failing"), "{mail}");
    let body = mail.split_once("\n\n").map_or("", |(_, body)| body);
    assert_eq!(
        body,
        "lockfile: the run of job \"failing\" failed (exit status 3); its output follows\nto stdout\nto stderr\n"
    );
}
