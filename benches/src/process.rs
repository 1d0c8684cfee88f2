//! Whole processes: `lockfile run -n FILE true` against util-linux
//! `flock -n FILE true` and against `true` alone. Wall time from fork to
//! reaped, and the peak RSS wait4(2) reports for the child (the largest of
//! the child and the descendants it reaped, here `true`).

use std::ffi::{CString, OsString};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, Result, bail};

pub(crate) const TRUE: &str = "true";
pub(crate) const FLOCK: &str = "flock -n FILE true";
pub(crate) const OURS: &str = "lockfile run -n FILE true";
/// The same binary as the linker wrote it (`--lockfile-bin` itself): the
/// row above runs a copy, as an install writes one.
pub(crate) const OURS_AS_LINKED: &str = "… the linker's own file";
/// The installed copy through a symlink named `flock`, as the drop-in is
/// installed: `flock -n FILE true` in its flock(1) personality.
pub(crate) const OURS_AS_FLOCK: &str = "lockfile as flock: flock -n FILE true";
/// A second start of the same binary, which is what the keeper adds to a
/// lease's run (the keeper is the binary re-executed; COMMAND's own spawn
/// moves into it and costs no more): `--version`, which ends at once with
/// status 0 after the same start-up and a little more (clap's parse).
pub(crate) const OURS_START: &str = "lockfile --version (the keeper's start-up, at most)";
pub(crate) const LAUNCHER_RSS: &str = "rss|launcher fork + _exit";

/// A command line to time.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    pub(crate) name: &'static str,
    program: PathBuf,
    args: Vec<OsString>,
}

/// Finds an executable on PATH, so that the lookup is not part of the timing.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The programs: `true`, flock(1) (`Err` with the reason when missing),
/// ours twice, as a copy of `lockfile_bin` in `dir` and as `lockfile_bin`
/// itself, ours as flock(1), and the copy's bare start-up.
///
/// Why both: the page cache of a file the linker wrote is built in smaller
/// pieces than that of a file written by write(2) or copy_file_range(2), as
/// `cargo install` and package managers write theirs, and a start-up that
/// faults in the binary's pages pays for it (about ten page faults per run
/// more, see BENCHMARKS.md). What users run is the installed copy; the
/// target is judged on it.
pub(crate) fn programs(
    dir: &Path,
    lockfile_bin: &Path,
) -> Result<(Program, std::result::Result<Program, String>, [Program; 4])> {
    let true_bin = which("true").context("`true` is not on PATH")?;
    let truth = Program {
        name: TRUE,
        program: true_bin,
        args: vec![],
    };
    let flock = match which("flock") {
        Some(flock) => Ok(Program {
            name: FLOCK,
            program: flock,
            args: vec!["-n".into(), dir.join("flock1.lock").into(), "true".into()],
        }),
        None => Err("skipped: util-linux flock(1) is not on PATH".to_owned()),
    };
    let installed = dir.join("lockfile");
    std::fs::copy(lockfile_bin, &installed).with_context(|| {
        format!(
            "cannot copy {} to {}",
            lockfile_bin.display(),
            installed.display()
        )
    })?;
    let as_flock = dir.join("flock");
    if !as_flock.exists() {
        std::os::unix::fs::symlink(&installed, &as_flock)
            .with_context(|| format!("cannot make the symlink {}", as_flock.display()))?;
    }
    let ours = |name, program: &Path| Program {
        name,
        program: program.to_path_buf(),
        args: vec![
            "run".into(),
            "-n".into(),
            dir.join("lockfile-run.lock").into(),
            "true".into(),
        ],
    };
    let ours_as_flock = Program {
        name: OURS_AS_FLOCK,
        program: as_flock,
        args: vec!["-n".into(), dir.join("flock2.lock").into(), "true".into()],
    };
    let start = Program {
        name: OURS_START,
        program: installed.clone(),
        args: vec!["--version".into()],
    };
    Ok((
        truth,
        flock,
        [
            ours(OURS, &installed),
            ours(OURS_AS_LINKED, lockfile_bin),
            ours_as_flock,
            start,
        ],
    ))
}

/// The process that starts the measured programs.
///
/// Peak RSS cannot be measured from a big process: a forked child starts
/// with a copy of its parent's page tables, and exec(2) folds the peak RSS
/// of the image it replaces into the child's ru_maxrss. So this program
/// starts a small launcher (itself, freshly exec'ed) early, and the launcher
/// forks and execs each measured program, waits for it with wait4(2), and
/// reports wall time and ru_maxrss. The launcher's own footprint is the
/// floor of every RSS figure; `fork + _exit` measures it.
#[derive(Debug)]
pub(crate) struct Launcher {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Launcher {
    pub(crate) fn start(exe: &Path) -> Result<Launcher> {
        let mut child = Command::new(exe)
            .arg("--child")
            .arg("launcher")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start the launcher")?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Launcher {
            child,
            stdin,
            stdout,
        })
    }

    /// One run: (wall nanoseconds, peak RSS in KiB). `None` runs nothing:
    /// the launcher forks and the child exits at once.
    pub(crate) fn run(&mut self, p: Option<&Program>) -> Result<(f64, f64)> {
        let mut line = String::from("run");
        if let Some(p) = p {
            for part in
                std::iter::once(p.program.as_os_str()).chain(p.args.iter().map(|a| a.as_os_str()))
            {
                line.push('\t');
                line.push_str(part.to_str().context("a non-UTF-8 argument")?);
            }
        }
        writeln!(self.stdin, "{line}")?;
        self.stdin.flush()?;
        let mut answer = String::new();
        self.stdout.read_line(&mut answer)?;
        let f: Vec<&str> = answer.split_whitespace().collect();
        match f[..] {
            [wall, rss, "0"] => Ok((wall.parse()?, rss.parse()?)),
            _ => bail!(
                "`{}` failed: {answer:?}",
                p.map_or("fork + _exit", |p| p.name)
            ),
        }
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The launcher's side: for each line `run\tPROGRAM\tARG...`, fork, exec
/// PROGRAM with its output sent to /dev/null, wait4, and answer
/// `WALL_NS MAXRSS_KIB EXIT_STATUS`. An empty `run` forks a child that exits
/// at once.
pub(crate) fn launcher_main() -> Result<()> {
    let devnull = CString::new("/dev/null")?;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        let mut parts = line.split('\t');
        if parts.next() != Some("run") {
            bail!("bad launcher command {line:?}");
        }
        let argv: Vec<CString> = parts.map(CString::new).collect::<Result<_, _>>()?;
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let start = crate::sys::mono_ns();
        // SAFETY: this process is single-threaded, so the child may do
        // anything; it only calls async-signal-safe functions anyway.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error()).context("fork");
        }
        if pid == 0 {
            // SAFETY: in the child: open, dup2, execv and _exit on live,
            // NUL-terminated strings and a NULL-terminated argv.
            unsafe {
                if argv.is_empty() {
                    libc::_exit(0);
                }
                let fd = libc::open(devnull.as_ptr(), libc::O_RDWR);
                for target in 0..3 {
                    libc::dup2(fd, target);
                }
                libc::execv(ptrs[0], ptrs.as_ptr());
                libc::_exit(127);
            }
        }
        let mut status = 0;
        // SAFETY: rusage is plain data, written by wait4 before it is read.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: waits for our own child; `status` and `ru` are live.
            let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
            if rc == pid {
                break;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err).context("wait4");
            }
        }
        let wall = crate::sys::mono_ns() - start;
        let code = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        };
        writeln!(out, "{wall} {} {code}", ru.ru_maxrss)?;
        out.flush()?;
    }
    Ok(())
}
