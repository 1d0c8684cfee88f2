//! Runs the torture harness in a short configuration: real processes, real
//! SIGKILLs, the `lockfile` command built for the occasion.

mod common;

use common::torture;

#[test]
fn a_short_torture_run_passes_and_does_what_it_says() {
    let (workers, rounds) = (6, 40);
    let run = torture(&[
        "--workers",
        &workers.to_string(),
        "--rounds",
        &rounds.to_string(),
        "--kill-every",
        "10",
    ]);
    run.check_passed(
        "the run failed: an overlap, a held lock unlinked or its record overwritten, an acquisition failed because of inspect, or an unexpected error",
        &[
            "overlaps",
            "acquisitions failed because of inspect",
            "unexpected errors",
        ],
    );
    // At least: a driver whose wrapper was killed starts its next round
    // while the orphaned command may still complete the previous one.
    let sections = run.figure("critical sections completed");
    run.check(
        sections >= workers * rounds,
        format_args!(
            "{sections} critical sections completed, fewer than {workers} workers x {rounds} rounds"
        ),
    );
    // The run did what it claims: it killed holders, and the probe and the
    // inspector ran.
    run.check(
        run.figure("holders killed (SIGKILL)") > 0,
        "nobody was killed",
    );
    let probe = run.line("acquisitions failed because of inspect");
    run.check(
        !probe.contains("probe: 0 "),
        format_args!("the probe never ran: {probe}"),
    );
    run.check(
        !probe.contains("inspector: 0 "),
        format_args!("the inspector never ran: {probe}"),
    );
}

#[test]
fn the_detector_sees_overlaps_when_exclusion_is_sabotaged() {
    // Without this, a harness whose detector never fires would pass forever.
    let run = torture(&[
        "--sabotage",
        "--workers",
        "4",
        "--run-workers",
        "0",
        "--rounds",
        "30",
        "--locks",
        "1",
        "--hold-us",
        "3000",
        "--kill-every",
        "0",
    ]);
    run.check(
        run.output.status.code() == Some(1),
        "a sabotaged run must fail",
    );
    run.check(run.figure("overlaps") > 0, "the detector saw nothing");
}
