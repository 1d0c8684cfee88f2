//! A library lease worker: `rounds` critical sections, each under a lease
//! taken with the lease layer's `Engine::acquire`, mixing tries, short
//! waits and waits long enough to outlast a dead holder's TTL. Restarted by
//! the coordinator after a SIGKILL, it carries on from the slot's count;
//! the lease it held then stands on the server until its TTL runs out.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use anyhow::Result;
use lockfile::wait::Wait;
use lockfile_lease::{Engine, LeaseRequest};
use rustix::fs::FlockOperation;

use super::{Leases, name};
use crate::board::{Rng, Seat, now_ns, state};
use crate::detector::{log_token, open_detector, take_detector};
use crate::worker::sabotaged_section;

pub(crate) fn lease_worker(dir: &Path, index: usize, leases: &Leases) -> Result<i32> {
    let Seat {
        board,
        layout,
        slot,
        locks,
        rounds,
    } = Seat::open(dir, index)?;
    let detectors: Vec<File> = (0..locks)
        .map(|k| open_detector(&layout.detector(k)))
        .collect::<Result<_>>()?;
    let engine = leases.engine()?;
    let ttl = leases.ttl;
    let mut rng = Rng::new(3000 + index as u64);
    while slot.done.load(SeqCst) < rounds && !board.stopping() {
        let k = rng.below(u64::from(locks)) as u32;
        let detector = &detectors[k as usize];
        if board.sabotage.load(SeqCst) != 0 {
            let holder = || inspected(engine.as_ref(), k);
            sabotaged_section(board, index, k, detector, &holder, &mut rng);
            continue;
        }
        // A third try, a third wait less than a TTL (and so often give up
        // on a dead holder's lease), a third wait long enough to outlast it.
        let wait = match rng.below(3) {
            0 => Wait::No,
            1 => Wait::up_to(Some(Duration::from_millis(
                10 + rng.below(ttl.as_millis() as u64),
            ))),
            _ => Wait::up_to(Some(ttl * 3)),
        };
        let mut request = LeaseRequest::new();
        request.wait(wait).ttl(ttl).job(format!("torture-{index}"));
        slot.state.store(state::WAITING, SeqCst);
        let lease = match engine.acquire(&name(k), &request) {
            Ok(lease) => lease,
            Err(e) if e.is_contended() => {
                slot.state.store(state::IDLE, SeqCst);
                std::thread::sleep(Duration::from_micros(rng.below(2000)));
                continue;
            }
            Err(e) => {
                board.error(format_args!("worker {index}: acquire {}: {e}", name(k)));
                return Ok(3);
            }
        };
        board.log_acquisition(k, now_ns());
        slot.enter(k);

        let took_detector =
            take_detector(board, index, k, detector, &|| inspected(engine.as_ref(), k));
        if took_detector {
            let token = match board.sabotage_fencing.load(SeqCst) {
                0 => lease.fencing_token(),
                _ => u64::MAX - lease.fencing_token(),
            };
            log_token(board, index, k, detector, token);
        }
        // The section, which a holder must end by its deadline: the lease
        // layer's contract.
        let hold = Duration::from_micros(rng.below(board.hold_us.load(SeqCst) + 1));
        let until = (Instant::now() + hold).min(lease.deadline());
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
        let lost = lease.check().is_err();
        if took_detector && let Err(e) = rustix::fs::flock(detector, FlockOperation::Unlock) {
            board.error(format_args!("worker {index}: unlock detector: {e}"));
        }
        slot.done.fetch_add(1, SeqCst);
        slot.state.store(state::RELEASING, SeqCst);
        match lease.release() {
            Ok(released) if !lost && !released.was_lost() => {}
            Ok(_) => {
                board.leases_lost.fetch_add(1, SeqCst);
                eprintln!(
                    "lockfile-torture: LOST: worker {index} (pid {}) lost its lease on {} during its section",
                    std::process::id(),
                    name(k)
                );
            }
            Err(e) => board.error(format_args!("worker {index}: release {}: {e}", name(k))),
        }
        slot.state.store(state::IDLE, SeqCst);
    }
    slot.state.store(state::FINISHED, SeqCst);
    Ok(0)
}

/// What the engine says of lease `k`, for an overlap's message.
pub(crate) fn inspected(engine: &dyn Engine, k: u32) -> String {
    match engine.inspect(&name(k)) {
        Ok(report) => format!(
            "{}: {:?}, token {:?}, owner pid {:?}",
            name(k),
            report.state,
            report.fencing_token,
            report.owner.as_ref().map(|o| o.pid)
        ),
        Err(e) => format!("{}: inspect: {e}", name(k)),
    }
}
