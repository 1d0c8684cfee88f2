//! The personality's description (`doc.rs`, which the man page is made
//! from) holds to its getopt parser. Kept apart from `doc.rs`, which the
//! workspace's documentation generator shares as it is.

use std::ffi::OsString;

use crate::cli::flock::command;

/// What the getopt parser answers for `args`: `Err` with its message
/// when it refuses an option.
fn parses(args: &[&str]) -> Result<(), String> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    super::translate(&args).map(|_| ())
}

/// Whether the parser takes `option` (with a value when `value`) before
/// a file and a command, or before a descriptor number (`-u`).
fn takes(option: &str, value: bool) -> Result<(), String> {
    let mut words = vec![option];
    if value {
        words.push("5");
    }
    let with = |rest: &[&'static str]| {
        let mut all = words.clone();
        all.extend_from_slice(rest);
        parses(&all)
    };
    with(&["f", "true"]).or_else(|_| with(&["9"]))
}

/// Every option of the description is one the parser takes, by its
/// short name, its long name and its aliases, and every option the
/// parser takes is described.
#[test]
fn the_description_holds_to_the_getopt_parser() {
    let cmd = command();
    let mut described_shorts = Vec::new();
    let mut described_longs = Vec::new();
    for arg in cmd.get_arguments() {
        let value = arg.get_action().takes_values();
        for short in arg.get_short_and_visible_aliases().into_iter().flatten() {
            described_shorts.push(short);
        }
        for short in arg.get_all_short_aliases().into_iter().flatten() {
            described_shorts.push(short);
        }
        for long in arg.get_long_and_visible_aliases().into_iter().flatten() {
            described_longs.push(long.to_owned());
        }
        for long in arg.get_all_aliases().into_iter().flatten() {
            described_longs.push(long.to_owned());
        }
        // -c comes after the file; -h and -V print and exit.
        if matches!(arg.get_id().as_str(), "command" | "help" | "version") {
            continue;
        }
        let shorts = arg.get_short_and_visible_aliases().into_iter().flatten();
        let shorts = shorts.chain(arg.get_all_short_aliases().into_iter().flatten());
        for short in shorts {
            takes(&format!("-{short}"), value).unwrap_or_else(|e| panic!("-{short}: {e}"));
        }
        let longs = arg.get_long_and_visible_aliases().into_iter().flatten();
        let longs = longs.chain(arg.get_all_aliases().into_iter().flatten());
        for long in longs {
            takes(&format!("--{long}"), value).unwrap_or_else(|e| panic!("--{long}: {e}"));
        }
    }
    parses(&["f", "-c", "true"]).unwrap();
    parses(&["f", "--command", "true"]).unwrap();
    described_shorts.sort_unstable();
    described_shorts.dedup();
    // getopt's `+sexnoFuw:E:hV`, and -c after the file.
    let mut getopt: Vec<char> = "sexnoFuwEhVc".chars().collect();
    getopt.sort_unstable();
    assert_eq!(described_shorts, getopt);
    // Every other short option is refused by the parser.
    for c in ('a'..='z').chain('A'..='Z') {
        if !getopt.contains(&c) {
            assert!(parses(&[&format!("-{c}"), "f", "true"]).is_err(), "-{c}");
        }
    }
    for long in [
        "shared",
        "exclusive",
        "unlock",
        "nonblock",
        "nb",
        "nonblocking",
        "timeout",
        "wait",
        "conflict-exit-code",
        "close",
        "command",
        "no-fork",
        "verbose",
        "help",
        "version",
    ] {
        assert!(described_longs.iter().any(|l| l == long), "--{long}");
    }
    assert!(parses(&["--no-such-option", "f", "true"]).is_err());
}
