//! COMMAND for the fault tests: a writer to a fenced store, which is this
//! test binary run again (`lockfile run … NAME -- <test binary> --exact
//! ENTRY`, where ENTRY is a test that calls [`write_if_requested`]). It
//! writes batches with `$LOCKFILE_FENCING_TOKEN`, and logs what the store
//! said to each, one line per write, to a file of its own: the test reads
//! what was attempted there, and what was accepted in the store.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lockfile_examples::{FencedStore, StoreError};

use super::{lockfile, wait_until};

const STORE: &str = "LOCKFILE_TEST_FENCED_STORE";
const LOG: &str = "LOCKFILE_TEST_FENCED_LOG";
const WRITES: &str = "LOCKFILE_TEST_FENCED_WRITES";
const EVERY_MS: &str = "LOCKFILE_TEST_FENCED_EVERY_MS";

/// One line of a writer's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The writer runs, as `pid`, with this fencing token.
    Started { pid: u32, token: u64 },
    /// The store accepted this batch.
    Accepted { batch: u32 },
    /// The store refused this batch: it had accepted `highest`.
    Refused { batch: u32, highest: u64 },
}

/// A writer to start as COMMAND, and its log.
#[derive(Debug)]
pub(crate) struct Writer {
    store: PathBuf,
    log: PathBuf,
    writes: u32,
    every: Duration,
}

impl Writer {
    /// Writes to `store` every 20 ms until it is stopped, logging to `log`.
    pub(crate) fn new(store: &Path, log: PathBuf) -> Writer {
        Writer {
            store: store.to_owned(),
            log,
            writes: 0,
            every: Duration::from_millis(20),
        }
    }

    /// Writes `n` batches, then exits 0.
    pub(crate) fn writes(mut self, n: u32) -> Writer {
        self.writes = n;
        self
    }

    /// `lockfile run ARGS -- <this writer>`, where `entry` is the test that
    /// calls [`write_if_requested`].
    pub(crate) fn run(&self, entry: &str, args: &[&str]) -> Command {
        let mut cmd = lockfile();
        cmd.arg("run")
            .args(args)
            .arg("--")
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", entry, "--nocapture", "--test-threads=1"])
            .env(STORE, &self.store)
            .env(LOG, &self.log)
            .env(WRITES, self.writes.to_string())
            .env(EVERY_MS, self.every.as_millis().to_string());
        cmd
    }

    /// The log so far.
    pub(crate) fn events(&self) -> Vec<Event> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|line| {
                let words: Vec<&str> = line.split(' ').collect();
                let n = |i: usize| -> u64 {
                    words
                        .get(i)
                        .and_then(|w| w.parse().ok())
                        .unwrap_or_else(|| panic!("a malformed log line: {line:?}"))
                };
                match words[0] {
                    "started" => Event::Started {
                        pid: n(1) as u32,
                        token: n(2),
                    },
                    "accepted" => Event::Accepted { batch: n(1) as u32 },
                    "refused" => Event::Refused {
                        batch: n(1) as u32,
                        highest: n(2),
                    },
                    _ => panic!("the writer failed: {line}"),
                }
            })
            .collect()
    }

    /// Waits for an event that `wanted` picks, and returns it.
    pub(crate) fn wait_for(&self, what: &str, wanted: impl Fn(&Event) -> bool) -> Event {
        let mut found = None;
        wait_until(what, || {
            found = self.events().into_iter().find(&wanted);
            found.is_some()
        });
        found.unwrap()
    }

    /// The writer's pid and fencing token, once it runs.
    pub(crate) fn started(&self) -> (u32, u64) {
        match self.wait_for("the writer to start", |e| {
            matches!(e, Event::Started { .. })
        }) {
            Event::Started { pid, token } => (pid, token),
            _ => unreachable!(),
        }
    }
}

/// The writer's body, when this process was started as one; nothing
/// otherwise.
pub(crate) fn write_if_requested() {
    let Some(store) = std::env::var_os(STORE) else {
        return;
    };
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let token: u64 = var("LOCKFILE_FENCING_TOKEN").parse().unwrap();
    let writes: u32 = var(WRITES).parse().unwrap();
    let every = Duration::from_millis(var(EVERY_MS).parse().unwrap());
    let log_path = PathBuf::from(var(LOG));
    // One write(2) a line, appended: lines never interleave or tear.
    let log = |line: String| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()))
            .unwrap();
    };
    log(format!("started {} {token}", std::process::id()));
    let store = FencedStore::new(PathBuf::from(store));
    for batch in 1.. {
        match store.write(token, &format!("{token}:{batch}")) {
            Ok(()) => log(format!("accepted {batch}")),
            Err(StoreError::Fenced { highest, .. }) => log(format!("refused {batch} {highest}")),
            Err(e) => {
                log(format!("failed {batch} {e}"));
                panic!("{e}");
            }
        }
        if batch == writes {
            return;
        }
        std::thread::sleep(every);
    }
}
