//! `inspect`: who holds a lease, with its fencing token and what is left
//! of its TTL by the server's count, and how its last run ended
//! ([`LeaseOptions::inspect`] and [`LeaseOptions::inspect_all`] live here).
//! The report is the lease layer's [`LeaseReport`].
//!
//! A key under the prefix that another client wrote (of another type, a
//! value too large to be ours, no expiry) is reported for its name, with a
//! note saying what it holds: never a failure of the whole listing.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use lockfile::inspect::InspectOptions;
use lockfile_lease::LeaseReport;
use lockfile_lease::report::Holding;

use crate::conn::{Conn, Connection, block_on};
use crate::key::{Keys, name_of};
use crate::script::{self, LIST, MAX_VALUE, READ_LEASE};
use crate::{ENGINE, LeaseOptions, Operation, Result, history};
use lockfile_lease::name::MAX_NAME_LEN;

/// The most names a listing reads: far more than a fleet's jobs.
const MAX_NAMES: usize = 100_000;

impl LeaseOptions {
    /// Who holds the lease on `name`, with its fencing token and the
    /// lease's remaining time-to-live, and how its last run ended (its run
    /// history). Never takes or changes anything.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName), or a server error.
    pub fn inspect(&self, name: &str) -> Result<LeaseReport> {
        inspect(self, name)
    }

    /// Every name with a lease or a run history under the prefix, sorted
    /// by name, each with its run history.
    ///
    /// # Errors
    ///
    /// A server error.
    pub fn inspect_all(&self) -> Result<Vec<LeaseReport>> {
        inspect_all(self)
    }
}

pub(crate) fn inspect(opts: &LeaseOptions, name: &str) -> Result<LeaseReport> {
    let keys = Keys::new(&opts.prefix, name)?;
    let conn = Conn::new(opts, &keys.lease)?;
    block_on(&keys.lease, || async {
        let mut c = conn.connect_to_read(conn.request_timeout).await?;
        report(&conn, &mut c, name, &keys).await
    })
}

pub(crate) fn inspect_all(opts: &LeaseOptions) -> Result<Vec<LeaseReport>> {
    let pattern = format!("{}{{*}}:*", glob_escaped(&opts.prefix));
    let conn = Conn::new(opts, &pattern)?;
    block_on(&pattern, || async {
        let mut c = conn.connect_to_read(conn.request_timeout).await?;
        let mut names = BTreeSet::new();
        let mut cursor = "0".to_owned();
        // Ours are the prefix, the braces, a name and a suffix.
        let longest = (opts.prefix.len() + MAX_NAME_LEN + 16).to_string();
        loop {
            let reply = LIST
                .run(
                    &conn,
                    &mut c,
                    Operation::Read,
                    conn.request_timeout,
                    &[],
                    &[cursor.as_bytes(), pattern.as_bytes(), longest.as_bytes()],
                )
                .await?;
            let page = script::fields(&conn, Operation::Read, reply)?;
            for key in page.iter().skip(1) {
                if let redis::Value::BulkString(key) = key
                    && let Some(name) = name_of(&opts.prefix, key, "lease")
                        .or_else(|| name_of(&opts.prefix, key, "history"))
                {
                    names.insert(name.to_owned());
                }
            }
            if names.len() > MAX_NAMES {
                return Err(conn.error(
                    Operation::Read,
                    format!("more than {MAX_NAMES} lease names under the prefix"),
                ));
            }
            cursor = String::from_utf8_lossy(&script::bytes(&page, 0)).into_owned();
            if cursor == "0" || cursor.is_empty() {
                break;
            }
        }
        let mut reports = Vec::with_capacity(names.len());
        for name in names {
            let keys = Keys::new(&opts.prefix, &name)?;
            reports.push(report(&conn.for_key(&keys.lease), &mut c, &name, &keys).await?);
        }
        Ok(reports)
    })
}

/// `text` with the characters that a `SCAN MATCH` pattern reads as its own
/// escaped.
fn glob_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The report on `name`: its lease key and its history key, each read by
/// one script.
async fn report(conn: &Conn, c: &mut Connection, name: &str, keys: &Keys) -> Result<LeaseReport> {
    let history_conn = conn.for_key(&keys.history);
    let most = MAX_VALUE.to_string();
    let reply = READ_LEASE
        .run(
            conn,
            c,
            Operation::Read,
            conn.request_timeout,
            &[&keys.lease],
            &[most.as_bytes()],
        )
        .await?;
    let fields = script::fields(conn, Operation::Read, reply)?;
    // A history this user may not read is a note beside the report.
    let history = match history::read(&history_conn, c, conn.request_timeout).await {
        Ok(read) => read.history,
        Err(e) => Err(e.to_string()),
    };
    let mut report = LeaseReport::free(ENGINE, name, &keys.lease).with_history(history);
    let kind = script::bytes(&fields, 0);
    if kind != b"none" {
        let token = script::bytes(&fields, 1);
        let owner = script::bytes(&fields, 2);
        let size = script::int(&fields, 3).unwrap_or(0);
        let pttl = script::int(&fields, 4).unwrap_or(-2);
        let fencing_token = std::str::from_utf8(&token)
            .ok()
            .and_then(|t| t.parse().ok());
        report = report.held(Holding {
            value: &owner,
            fencing_token: fencing_token.unwrap_or(0),
            lease_id: None,
            ttl: None,
            ttl_remaining: u64::try_from(pttl).ok().map(Duration::from_millis),
        });
        report.ttl = script::int(&fields, 5)
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Duration::from_millis);
        let note = if kind != b"hash" {
            Some(format!(
                "the key holds a {}, not a lease of ours",
                lockfile::text::quoted_bytes(&kind)
            ))
        } else if usize::try_from(size).is_ok_and(|s| s > MAX_VALUE) {
            Some(format!(
                "its owner record is {size} bytes long, not one of ours (under {MAX_VALUE})"
            ))
        } else if pttl == -1 {
            Some(
                "the key has no expiry: no holder of ours wrote it, and it blocks every run \
                 until it is deleted"
                    .to_owned(),
            )
        } else if fencing_token.is_none() {
            Some("the key holds no fencing token of ours".to_owned())
        } else {
            None
        };
        if let Some(note) = note {
            report.content_error = Some(note);
        }
    }
    Ok(report.judged(&InspectOptions::new(), SystemTime::now()))
}
