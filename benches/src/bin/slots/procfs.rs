//! What /proc says about a child: whether it is asleep in its wait yet, and
//! how much CPU it used and how often it woke up while waiting.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

/// How long a child may take to settle into its wait.
const SETTLING: Duration = Duration::from_secs(10);

/// The fields of /proc/PID/stat from the third (the state) on: the command
/// name before them may hold spaces and parentheses.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.get(text.rfind(')')? + 2..)?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Whether the child sleeps in poll(2): its state is S, and the kernel
/// function it sleeps in, when /proc/PID/wchan names one, is a poll's. (Its
/// sweep opens and flocks without sleeping; reading its commands sleeps in
/// a pipe's read.)
fn asleep_in_poll(pid: u32) -> bool {
    let sleeping = stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s == "S"));
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    let unnamed = wchan.is_empty() || wchan == "0";
    sleeping && (unnamed || wchan.contains("poll"))
}

/// Whether /proc/locks lists the child as blocked on a lock (a `->` line).
fn queued_on_a_lock(pid: u32) -> Result<bool> {
    let pid = pid.to_string();
    let locks = std::fs::read_to_string("/proc/locks")?;
    Ok(locks.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() >= 7 && f[1] == "->" && f[5] == pid
    }))
}

/// Waits until the child that said it is waiting sleeps in its wait: queued
/// on the lock in /proc/locks (`flock`), or asleep in poll(2) (any slot),
/// seen twice 200 µs apart, so that its first round of attempts is over.
pub(crate) fn await_asleep(pid: u32, flock: bool) -> Result<()> {
    let give_up = Instant::now() + SETTLING;
    let mut seen = 0;
    while seen < 2 {
        let asleep = if flock {
            queued_on_a_lock(pid)?
        } else {
            asleep_in_poll(pid)
        };
        seen = if asleep { seen + 1 } else { 0 };
        if Instant::now() > give_up {
            bail!("the waiting child {pid} never went to sleep in its wait");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// The CPU time the (single-threaded) child has used, in nanoseconds: the
/// run time of /proc/PID/schedstat, or user + system time from
/// /proc/PID/stat, in clock ticks, where the kernel keeps no schedstat.
pub(crate) fn cpu_ns(pid: u32) -> Option<u64> {
    let schedstat = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok();
    if let Some(ns) = schedstat.and_then(|s| s.split_whitespace().next()?.parse().ok()) {
        return Some(ns);
    }
    let f = stat_fields(pid)?;
    // proc(5): utime is field 14 and stime 15; `f` starts at field 3.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let hz = rustix::param::clock_ticks_per_second();
    Some(ticks * 1_000_000_000 / hz)
}

/// How many times the child went to sleep of its own accord (its
/// voluntary context switches): once per wake-up of a waiter that sleeps
/// in poll(2) and finds nothing to take.
pub(crate) fn voluntary_switches(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}
