//! `docs/json.md` held to what the command really writes: the keys of each
//! document as the page lists them, and the keys of real output, gathered
//! document by document.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Keys by document section (`inspect`, `owner`, `finding`, …).
pub(crate) type Keys = BTreeMap<String, BTreeSet<String>>;

/// What `docs/json.md` documents: each section's keys, and whether the
/// section lists at most the keys written (a finding's keys depend on its
/// kind, and no one run writes every kind) or exactly them.
pub(crate) struct Documented {
    keys: Keys,
    at_most: BTreeSet<String>,
}

impl Documented {
    /// Reads the tables that follow each `<!-- keys: SECTION -->` marker.
    pub(crate) fn read() -> Documented {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/json.md");
        let text = std::fs::read_to_string(path).expect("read docs/json.md");
        let mut keys = Keys::new();
        let mut at_most = BTreeSet::new();
        let mut section: Option<String> = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("<!-- keys: ") {
                let name = rest.trim_end_matches(" -->");
                let (name, most) = match name.strip_suffix(" (at most)") {
                    Some(name) => (name, true),
                    None => (name, false),
                };
                assert!(
                    keys.insert(name.to_owned(), BTreeSet::new()).is_none(),
                    "docs/json.md: section {name} twice"
                );
                if most {
                    at_most.insert(name.to_owned());
                }
                section = Some(name.to_owned());
                continue;
            }
            let Some(name) = &section else { continue };
            if !line.starts_with('|') {
                if !keys[name].is_empty() {
                    section = None;
                }
                continue;
            }
            let cell = line.split('|').nth(1).unwrap_or("").trim();
            if let Some(key) = cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
                keys.get_mut(name).unwrap().insert(key.to_owned());
            }
        }
        Documented { keys, at_most }
    }

    /// Every key in `seen` is documented in its section; and every key the
    /// page documents in a section of `covered` was seen, but for
    /// `may_miss` (keys written only in states the caller cannot make).
    pub(crate) fn assert_matches(&self, seen: &Keys, covered: &[&str], may_miss: &[(&str, &str)]) {
        let mut wrong = Vec::new();
        for (section, keys) in seen {
            let Some(documented) = self.keys.get(section) else {
                wrong.push(format!("section {section} is not in docs/json.md"));
                continue;
            };
            for key in keys.difference(documented) {
                wrong.push(format!("{section}: `{key}` is written but not documented"));
            }
        }
        for section in covered {
            assert!(
                seen.contains_key(*section),
                "no {section} object was seen: {seen:?}"
            );
            if self.at_most.contains(*section) {
                continue;
            }
            for key in self.keys[*section].difference(&seen[*section]) {
                if !may_miss.contains(&(section, key.as_str())) {
                    wrong.push(format!(
                        "{section}: `{key}` is documented but never written"
                    ));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "docs/json.md disagrees with the output:\n{}",
            wrong.join("\n")
        );
    }
}

/// Adds the keys of `value`, a document of `section`, and of the objects
/// it holds, each under its own section.
pub(crate) fn gather(value: &Value, section: &str, seen: &mut Keys) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| gather(v, section, seen)),
        Value::Object(map) => {
            let keys = seen.entry(section.to_owned()).or_default();
            keys.extend(map.keys().cloned());
            for (key, child) in map {
                if let Some(inner) = inner_section(section, key, child) {
                    gather(child, inner, seen);
                }
            }
        }
        _ => {}
    }
}

/// The section of the object (or the objects) under `key` of a `section`.
fn inner_section(section: &str, key: &str, child: &Value) -> Option<&'static str> {
    Some(match (section, key) {
        (_, "owner") => "owner",
        ("owner", "evicted") => "evicted",
        ("owner", "slot") => "slot",
        ("inspect", "slots") => "inspect",
        ("lease", "slots") => "lease",
        (_, "holders") => "holder",
        (_, "last_run") => "last_run",
        (_, "last_claimed_tick") => "claim",
        (_, "findings") => "finding",
        ("finding", "why") => "undecided",
        ("check", "verdicts") => "verdict",
        ("check", "report") if child.get("engine").is_some() => "lease",
        ("check", "report") => "inspect",
        _ => return None,
    })
}

/// The section of one object of an `inspect --json` array: a report, or
/// the error object in its place.
pub(crate) fn inspect_section(value: &Value) -> &'static str {
    match (value.get("engine").is_some(), value.get("error").is_some()) {
        (false, false) => "inspect",
        (false, true) => "inspect-error",
        (true, false) => "lease",
        (true, true) => "lease-error",
    }
}

/// `docs/json.md` against what `inspect --json` and `check --json` write
/// for leases of the engine that `engine` (`--etcd ENDPOINTS`, `--postgres
/// URL`) names: a lease held, one free with a history and a tick claimed,
/// one never taken. A value that is no owner record and a history that
/// cannot be read are left to the engines' own tests.
pub(crate) fn assert_lease_keys(engine: &[&str]) {
    use super::{Background, BoundedOutput, code, lockfile, stderr};
    fn then<'a>(engine: &[&'a str], tail: &[&'a str]) -> Vec<&'a str> {
        engine.iter().chain(tail).copied().collect()
    }
    let args = |tail: &[&'static str]| then(engine, tail);
    let out = lockfile()
        .arg("run")
        .args(args(&[
            "-n",
            "--once-per",
            "1m",
            "--max-runtime",
            "1h",
            "json-ok",
            "true",
        ]))
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (holder, line) = Background::spawn(&args(&[
        "json-held",
        "sh",
        "-c",
        "echo ready; exec sleep 60",
    ]));
    assert_eq!(line, "ready");
    let mut seen = Keys::new();
    let json = |out: std::process::Output| -> Value {
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("no JSON ({e}): {}", stderr(&out)))
    };
    let inspected = json(
        lockfile()
            .args(["inspect", "--json"])
            .args(args(&["json-ok", "json-held", "json-never"]))
            .bounded_output(),
    );
    for item in inspected.as_array().unwrap() {
        gather(item, inspect_section(item), &mut seen);
    }
    let checked = json(
        lockfile()
            .args(["check", "--json"])
            .args(args(&[
                "--expect-every",
                "1s",
                "--max-age",
                "0s",
                "json-held",
            ]))
            .bounded_output(),
    );
    gather(&checked, "check", &mut seen);
    drop(holder);
    Documented::read().assert_matches(
        &seen,
        &["lease", "last_run", "claim", "check", "verdict", "finding"],
        &[
            ("lease", "content_error"),
            ("lease", "history_error"),
            // Written for a set of slots, which `lease_slots.rs` asserts.
            ("lease", "slots"),
            ("check", "error"),
        ],
    );
}
