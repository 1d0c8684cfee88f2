//! `lockfile run --ping URL`: a dead man's switch in the healthchecks.io
//! protocol, which its self-hosted installs and several other monitors share.
//!
//! | when | request |
//! |---|---|
//! | COMMAND starts | `URL/start?rid=TOKEN`, the body naming host, pid and job |
//! | success | `URL?rid=TOKEN` |
//! | any other end | `URL/<exit status>?rid=TOKEN` (124 for a limit, 143 for SIGTERM, 79 for a lost lease), the body saying which; `URL/fail` when the status is not 1-255 |
//! | a skip | `URL/log`, the body naming the holder |
//! | a skip behind an unhealthy holder | `URL/fail`, so that the check goes down |
//!
//! TOKEN is the run's token (`LOCKFILE_TOKEN`), which pairs a start with its
//! end. Every request is a POST, its body the monitor's log for the event.
//!
//! The server keeps the head of a body, up to a limit it announces in the
//! `Ping-Body-Limit` header of its answers (10,000 bytes by default), and
//! decodes it as UTF-8 when the check filters on keywords. So every body is
//! valid UTF-8 (COMMAND's output is converted lossily) and no longer than the
//! limit the start ping's answer gave: the end of COMMAND's output, cut at a
//! character boundary, then our own lines last, so that what the server
//! keeps is the end of the job. A body the server refuses (400, 413, 500) is
//! sent once more without a body: the event itself is never lost.
//!
//! Pings are best effort. Each runs on a thread of its own, since a name
//! lookup has no timeout of its own. An attempt is bounded (2 s); a timeout,
//! a connection failure or a 5xx answer is tried again, three attempts in
//! all, after 0.5 s and 1 s; and the wrapper waits for a ping at most 3 s
//! (the start, which COMMAND waits for) or 10 s (the last one, before the
//! wrapper exits). The first failure is reported on stderr, later ones are
//! not, and none changes the exit status.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use lockfile::history::Outcome;
use lockfile::inspect::Unhealthy;

/// The body limit of a server that announces none: healthchecks'
/// `PING_BODY_LIMIT` default.
pub(crate) const DEFAULT_BODY_LIMIT: usize = 10_000;

/// How long one attempt may take, name lookup, TLS and answer included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

/// Attempts per ping, the first included.
const ATTEMPTS: u32 = 3;

/// The pause before the first retry; it doubles for each one after.
const FIRST_PAUSE: Duration = Duration::from_millis(500);

/// The longest the start ping holds COMMAND back. It goes on trying in the
/// background after that.
const START_PATIENCE: Duration = Duration::from_secs(3);

/// The longest the final ping (or a skip's) holds the wrapper's exit back:
/// more than one ping's attempts and pauses take.
const FINAL_PATIENCE: Duration = Duration::from_secs(10);

/// The longest the final ping waits for the start ping to be answered
/// first, so that the monitor sees them in order (and its body limit is
/// known).
const ORDER_PATIENCE: Duration = Duration::from_secs(2);

/// Pings one check URL for one run (or one skip).
#[derive(Debug)]
pub(crate) struct Pinger {
    agent: ureq::Agent,
    /// The URL up to its query, without a trailing slash.
    base: String,
    /// Its query, without the `?`; often empty.
    query: String,
    rid: Option<String>,
    /// Closed once the start ping is done.
    start: Option<Receiver<()>>,
    /// The server's body limit, from the answer to the start ping.
    body_limit: Arc<AtomicUsize>,
    /// Whether a failure was reported already: once is enough.
    reported: Arc<AtomicBool>,
}

/// A ping's body: COMMAND's output tail, and our own lines after it.
struct Body {
    output: Vec<u8>,
    ours: String,
}

impl Pinger {
    /// A pinger for `url`, an `http` or `https` URL.
    ///
    /// # Errors
    ///
    /// A message for a usage error, when `url` is not such a URL.
    pub(crate) fn new(url: &str) -> Result<Pinger, String> {
        let bad = |why: &str| format!("--ping `{url}`: {why}");
        let uri: ureq::http::Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(bad("not an http:// or https:// URL"));
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(bad("no host"));
        }
        let url = url.split('#').next().unwrap_or_default();
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(ATTEMPT_TIMEOUT))
            .http_status_as_error(false)
            .user_agent(concat!("lockfile/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Pinger {
            agent: config.into(),
            base: base.trim_end_matches('/').to_owned(),
            query: query.to_owned(),
            rid: None,
            start: None,
            body_limit: Arc::new(AtomicUsize::new(DEFAULT_BODY_LIMIT)),
            reported: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The full URL for `suffix`: the run's `rid` goes with every ping of a
    /// run, none with a skip's (a skip is no run).
    fn url(&self, suffix: &str) -> String {
        let rid = match (suffix, &self.rid) {
            ("/log", _) | (_, None) => None,
            (_, Some(rid)) => Some(format!("rid={rid}")),
        };
        let query: Vec<&str> = [Some(self.query.as_str()), rid.as_deref()]
            .into_iter()
            .flatten()
            .filter(|q| !q.is_empty())
            .collect();
        let mut url = format!("{}{suffix}", self.base);
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query.join("&"));
        }
        url
    }

    /// Sends one ping on a thread of its own, after `after` closes (or
    /// [`ORDER_PATIENCE`] passed); the returned channel closes when it is
    /// done. The body is put together there, once the limit is known.
    fn send(&self, suffix: &str, body: Body, after: Option<Receiver<()>>) -> Receiver<()> {
        let (done, finished) = channel::<()>();
        let url = self.url(suffix);
        let agent = self.agent.clone();
        let reported = Arc::clone(&self.reported);
        let limit = Arc::clone(&self.body_limit);
        let spawned = crate::thread::spawn("lockfile-ping", move || {
            if let Some(after) = after {
                let _ = after.recv_timeout(ORDER_PATIENCE);
            }
            let body = fit(&body.output, &body.ours, limit.load(Ordering::SeqCst));
            if let Err(why) = post(&agent, &url, body.into_bytes(), &limit) {
                report_once(&reported, &format!("lockfile: ping `{url}` failed: {why}"));
            }
            drop(done);
        });
        if let Err(e) = spawned {
            self.report(&format!("lockfile: cannot start a thread to ping: {e}"));
        }
        finished
    }

    /// Waits for a ping at most [`FINAL_PATIENCE`].
    fn wait(&self, done: Receiver<()>, suffix: &str) {
        if let Err(RecvTimeoutError::Timeout) = done.recv_timeout(FINAL_PATIENCE) {
            self.report(&format!(
                "lockfile: ping `{}` had no answer within {}s; not waiting for it",
                self.url(suffix),
                FINAL_PATIENCE.as_secs()
            ));
        }
    }

    fn report(&self, message: &str) {
        report_once(&self.reported, message);
    }

    /// COMMAND is about to start as the run `rid` of `job`: pings `/start`,
    /// and waits for it at most [`START_PATIENCE`].
    ///
    /// The body names the host, pid and job, never the command line: it
    /// goes to a third party, and a word in it could match the check's
    /// failure keywords.
    pub(crate) fn started(&mut self, rid: &str, job: &str) {
        self.rid = Some(rid.to_owned());
        let host = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        let ours = format!(
            "lockfile: run {rid} started: host {}, pid {}, job {}\n",
            lockfile::text::quoted(&host),
            std::process::id(),
            lockfile::text::quoted(job)
        );
        let done = self.send(
            "/start",
            Body {
                output: Vec::new(),
                ours,
            },
            None,
        );
        // Done, or still trying: either way COMMAND waited long enough.
        let _ = done.recv_timeout(START_PATIENCE);
        self.start = Some(done);
    }

    /// COMMAND ended with `outcome`, and the wrapper exits with `exit_code`:
    /// pings success or the exit status, with `output` (the tail of
    /// COMMAND's output, with `--ping-log-bytes`), and waits for it at most
    /// [`FINAL_PATIENCE`].
    pub(crate) fn finished(&mut self, outcome: Outcome, exit_code: i32, output: Vec<u8>) {
        let (suffix, ours) = match outcome {
            Outcome::Succeeded => (String::new(), String::new()),
            other => {
                let suffix = match exit_code {
                    1..=255 => format!("/{exit_code}"),
                    _ => "/fail".to_owned(),
                };
                let line = format!(
                    "lockfile: the run {} (outcome {other}, exit status {exit_code})\n",
                    crate::monitor::outcome::what_happened(other)
                );
                (suffix, line)
            }
        };
        let after = self.start.take();
        let done = self.send(&suffix, Body { output, ours }, after);
        self.wait(done, &suffix);
    }

    /// A skip behind the holder `line` names: pings `/log`, or `/fail`
    /// behind an unhealthy holder; waits at most [`FINAL_PATIENCE`].
    pub(crate) fn skipped(&mut self, line: &str, unhealthy: Option<&Unhealthy>) {
        let mut ours = format!("lockfile: {line}\n");
        if let Some(why) = unhealthy {
            ours.push_str(&format!("lockfile: the holder looks unhealthy: {why}\n"));
        }
        let suffix = if unhealthy.is_some() { "/fail" } else { "/log" };
        let body = Body {
            output: Vec::new(),
            ours,
        };
        let done = self.send(suffix, body, None);
        self.wait(done, suffix);
    }
}

/// The body for a server that keeps `limit` bytes: valid UTF-8, at most
/// `limit` bytes, our lines `ours` whole and last, and before them as much
/// of the end of `output` as fits, starting at a character boundary. Output
/// that is not UTF-8 is converted lossily (U+FFFD).
fn fit(output: &[u8], ours: &str, limit: usize) -> String {
    let ours = tail_at_boundary(ours, limit);
    let room = limit - ours.len();
    // A tail cut inside a character starts with continuation bytes: drop
    // them rather than send a replacement character for half a character.
    let start = output
        .iter()
        .take(3)
        .take_while(|&&b| b & 0xC0 == 0x80)
        .count();
    let text = String::from_utf8_lossy(&output[start..]);
    let mut body = tail_at_boundary(&text, room).to_owned();
    body.push_str(ours);
    body
}

/// The longest end of `text` of at most `limit` bytes that starts at a
/// character boundary.
fn tail_at_boundary(text: &str, limit: usize) -> &str {
    let mut start = text.len().saturating_sub(limit);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

fn report_once(reported: &AtomicBool, message: &str) {
    if !reported.swap(true, Ordering::SeqCst) {
        errln!("{message}");
    }
}

/// One ping, retried on what may pass: a timeout, a failed connection or
/// name lookup, a 5xx answer. A 4xx answer or a bad URL will not. A body
/// the server refused (400, 413, 500) goes once more as none. The server's
/// `Ping-Body-Limit`, when it gives one, is stored in `limit`.
fn post(agent: &ureq::Agent, url: &str, body: Vec<u8>, limit: &AtomicUsize) -> Result<(), String> {
    let mut body = body;
    let mut pause = FIRST_PAUSE;
    let mut attempt = 1;
    loop {
        let passing = match agent.post(url).send(&body[..]) {
            Ok(answer) => {
                let announced = answer
                    .headers()
                    .get("ping-body-limit")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<usize>().ok());
                if let Some(announced) = announced {
                    limit.store(announced, Ordering::SeqCst);
                }
                let status = answer.status().as_u16();
                match status {
                    200..=299 => return Ok(()),
                    400 | 413 | 500 if !body.is_empty() => {
                        // The event matters more than its log: send it bare,
                        // at once, as a new attempt.
                        body = Vec::new();
                        continue;
                    }
                    500..=599 => format!("the server answered {}", answer.status()),
                    _ => return Err(format!("the server answered {}", answer.status())),
                }
            }
            Err(ureq::Error::Timeout(_)) => {
                format!("no answer within {}s", ATTEMPT_TIMEOUT.as_secs())
            }
            Err(
                e @ (ureq::Error::Io(_)
                | ureq::Error::HostNotFound
                | ureq::Error::ConnectionFailed
                | ureq::Error::Protocol(_)),
            ) => e.to_string(),
            Err(e) => return Err(e.to_string()),
        };
        if attempt == ATTEMPTS {
            return Err(format!("{passing} ({ATTEMPTS} attempts)"));
        }
        attempt += 1;
        std::thread::sleep(pause);
        pause = pause.saturating_mul(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_the_protocol() {
        let mut p = Pinger::new("https://hc.example/ping/abc/").unwrap();
        assert_eq!(p.url("/log"), "https://hc.example/ping/abc/log");
        p.rid = Some("T".to_owned());
        assert_eq!(p.url("/start"), "https://hc.example/ping/abc/start?rid=T");
        assert_eq!(p.url(""), "https://hc.example/ping/abc?rid=T");
        assert_eq!(p.url("/3"), "https://hc.example/ping/abc/3?rid=T");
        assert_eq!(p.url("/log"), "https://hc.example/ping/abc/log");
        let mut p = Pinger::new("http://h:8000/ping/key/slug?create=1#x").unwrap();
        p.rid = Some("T".to_owned());
        assert_eq!(
            p.url("/fail"),
            "http://h:8000/ping/key/slug/fail?create=1&rid=T"
        );
    }

    #[test]
    fn a_url_that_is_not_http_is_a_usage_error_naming_it() {
        for url in ["ftp://h/x", "hc-ping.com/abc", "http://", "not a url"] {
            let err = Pinger::new(url).unwrap_err();
            assert!(err.contains(&format!("`{url}`")), "{err}");
        }
    }

    #[test]
    fn a_body_keeps_the_end_of_the_output_and_our_lines_within_the_limit() {
        let output: Vec<u8> = (0..30_000).map(|i| b'a' + (i % 26) as u8).collect();
        let ours = "lockfile: the run was stopped\n";
        let body = fit(&output, ours, 10_000);
        assert_eq!(body.len(), 10_000);
        assert!(body.ends_with(ours));
        let kept = &body[..body.len() - ours.len()];
        assert!(output.ends_with(kept.as_bytes()));
        // Our lines alone over the limit: their end, still valid, and the
        // byte left over for the output.
        let long = "é".repeat(20);
        let body = fit(b"output", &long, 7);
        assert_eq!(body, "tééé");
    }

    #[test]
    fn a_body_is_valid_utf8_and_starts_at_a_character_boundary() {
        // A tail cut inside a two-byte character, and an invalid byte.
        let mut output = "é".repeat(10).into_bytes();
        output.remove(0);
        output.push(0xFF);
        output.extend_from_slice("end\n".as_bytes());
        let body = fit(&output, "", 10_000);
        assert_eq!(body, format!("{}\u{FFFD}end\n", "é".repeat(9)));
        // The limit falls inside a character: the tail starts after it.
        let body = fit("aé€b".as_bytes(), "", 5);
        assert_eq!(body, "€b");
    }
}
