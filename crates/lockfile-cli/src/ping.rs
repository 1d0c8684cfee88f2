//! `lockfile run --ping URL`: a dead man's switch in the healthchecks.io
//! protocol, which its self-hosted installs and several other monitors share.
//!
//! | when | request |
//! |---|---|
//! | COMMAND starts | `URL/start?rid=TOKEN` |
//! | success | `URL?rid=TOKEN` |
//! | failure | `URL/<exit status>?rid=TOKEN` |
//! | timed out, hung, evicted, lease lost | `URL/fail?rid=TOKEN`, the body saying which |
//! | a skip | `URL/log`, the body naming the holder |
//! | a skip behind an unhealthy holder | `URL/fail`, so that the check goes down |
//!
//! TOKEN is the run's token (`LOCKFILE_TOKEN`), which pairs a start with its
//! end. Every request is a POST, its body the monitor's log for the event.
//!
//! Pings are best effort. Each runs on a thread of its own, since a name
//! lookup has no timeout of its own. An attempt is bounded (2 s); a timeout,
//! a connection failure or a 5xx answer is tried again, three attempts in
//! all, after 0.5 s and 1 s; and the wrapper waits for a ping at most 3 s
//! (the start, which COMMAND waits for) or 10 s (the last one, before the
//! wrapper exits). The first failure is reported on stderr, later ones are
//! not, and none changes the exit status.

use lockfile::{Outcome, Unhealthy};

use crate::monitor::MonitorArgs;

#[cfg(feature = "ping")]
pub(crate) use enabled::Pinger;

/// A build without the `ping` feature has no HTTP client: `--ping` is a usage
/// error there.
#[cfg(not(feature = "ping"))]
pub(crate) type Pinger = NoPing;

/// What `run` tells a dead man's switch. A type, so that a binary whose
/// runs never ping ([`NoPing`]) links no HTTP client.
pub(crate) trait Ping: Sized {
    /// The pinger that `--ping` asks for, if it does.
    ///
    /// # Errors
    ///
    /// A message for a usage error: a URL that is not one, or `--ping` where
    /// there is no HTTP client.
    fn from_args(args: &MonitorArgs) -> Result<Option<Self>, String>;

    /// COMMAND is about to start as the run `rid`.
    fn started(&mut self, rid: &str);

    /// COMMAND ended with `outcome`, and the wrapper exits with `exit_code`.
    fn finished(&mut self, outcome: Outcome, exit_code: i32);

    /// A skip behind the holder `line` names, unhealthy when `unhealthy`
    /// says why.
    fn skipped(&mut self, line: &str, unhealthy: Option<&Unhealthy>);
}

/// No pinger can be made: runs that never ping.
#[derive(Debug)]
pub(crate) enum NoPing {}

impl Ping for NoPing {
    fn from_args(args: &MonitorArgs) -> Result<Option<NoPing>, String> {
        match args.ping {
            None => Ok(None),
            Some(_) => Err(
                "--ping needs a build with the `ping` feature (cargo install --features ping)"
                    .to_owned(),
            ),
        }
    }

    fn started(&mut self, _rid: &str) {
        match *self {}
    }

    fn finished(&mut self, _outcome: Outcome, _exit_code: i32) {
        match *self {}
    }

    fn skipped(&mut self, _line: &str, _unhealthy: Option<&Unhealthy>) {
        match *self {}
    }
}

#[cfg(feature = "ping")]
mod enabled {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
    use std::time::Duration;

    use lockfile::{Outcome, Unhealthy};

    use super::Ping;
    use crate::capture::Capture;
    use crate::monitor::MonitorArgs;

    /// How long one attempt may take, name lookup, TLS and answer included.
    const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

    /// Attempts per ping, the first included.
    const ATTEMPTS: u32 = 3;

    /// The pause before the first retry; it doubles for each one after.
    const FIRST_PAUSE: Duration = Duration::from_millis(500);

    /// The longest the start ping holds COMMAND back. It goes on trying in
    /// the background after that.
    const START_PATIENCE: Duration = Duration::from_secs(3);

    /// The longest the final ping (or a skip's) holds the wrapper's exit
    /// back: more than one ping's attempts and pauses take.
    const FINAL_PATIENCE: Duration = Duration::from_secs(10);

    /// The longest the final ping waits for the start ping to be answered
    /// first, so that the monitor sees them in order.
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
        log_bytes: usize,
        capture: Option<Capture>,
        /// Closed once the start ping is done.
        start: Option<Receiver<()>>,
        /// Whether a failure was reported already: once is enough.
        reported: Arc<AtomicBool>,
    }

    impl Pinger {
        /// A pinger for `url`, an `http` or `https` URL. With `log_bytes`
        /// above 0, the final ping carries the last `log_bytes` bytes of
        /// COMMAND's output.
        ///
        /// # Errors
        ///
        /// A message for a usage error, when `url` is not such a URL.
        pub(crate) fn new(url: &str, log_bytes: usize) -> Result<Pinger, String> {
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
                log_bytes,
                capture: None,
                start: None,
                reported: Arc::new(AtomicBool::new(false)),
            })
        }

        /// The full URL for `suffix`: the run's `rid` goes with every ping
        /// of a run, none with a skip's (a skip is no run).
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
        /// [`ORDER_PATIENCE`] passed); the returned channel closes when it
        /// is done.
        fn send(&self, suffix: &str, body: Vec<u8>, after: Option<Receiver<()>>) -> Receiver<()> {
            let (done, finished) = channel::<()>();
            let url = self.url(suffix);
            let agent = self.agent.clone();
            let reported = Arc::clone(&self.reported);
            let spawned = crate::thread::spawn("lockfile-ping", move || {
                if let Some(after) = after {
                    let _ = after.recv_timeout(ORDER_PATIENCE);
                }
                if let Err(why) = post(&agent, &url, &body) {
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
    }

    impl Ping for Pinger {
        fn from_args(args: &MonitorArgs) -> Result<Option<Pinger>, String> {
            args.ping
                .as_deref()
                .map(|url| Pinger::new(url, args.ping_log_bytes))
                .transpose()
        }

        /// COMMAND is about to start as the run `rid`: pings `/start`, and
        /// waits for it at most [`START_PATIENCE`]. With a log to send, this
        /// is also where COMMAND's output starts to pass through pipes.
        fn started(&mut self, rid: &str) {
            self.rid = Some(rid.to_owned());
            if self.log_bytes > 0 {
                match Capture::start(self.log_bytes) {
                    Ok(capture) => self.capture = Some(capture),
                    Err(e) => self.report(&format!(
                        "lockfile: cannot capture the command's output for the ping: {e}"
                    )),
                }
            }
            let done = self.send("/start", Vec::new(), None);
            // Done, or still trying: either way COMMAND waited long enough.
            let _ = done.recv_timeout(START_PATIENCE);
            self.start = Some(done);
        }

        /// COMMAND ended with `outcome`, and the wrapper exits with
        /// `exit_code`: pings success, the exit status or `/fail`, and waits
        /// for it at most [`FINAL_PATIENCE`].
        fn finished(&mut self, outcome: Outcome, exit_code: i32) {
            let mut body = Vec::new();
            let suffix = match outcome {
                Outcome::Succeeded => String::new(),
                Outcome::Failed if (1..=255).contains(&exit_code) => format!("/{exit_code}"),
                Outcome::Failed => "/fail".to_owned(),
                other => {
                    body = format!(
                        "lockfile: the run {} (outcome {other}, exit status {exit_code})\n",
                        what_happened(other)
                    )
                    .into_bytes();
                    "/fail".to_owned()
                }
            };
            if let Some(capture) = self.capture.take() {
                body.extend(capture.finish());
            }
            let after = self.start.take();
            let done = self.send(&suffix, body, after);
            self.wait(done, &suffix);
        }

        /// A skip behind the holder `line` names: pings `/log`, or `/fail`
        /// behind an unhealthy holder; waits at most [`FINAL_PATIENCE`].
        fn skipped(&mut self, line: &str, unhealthy: Option<&Unhealthy>) {
            let mut body = format!("lockfile: {line}\n");
            if let Some(why) = unhealthy {
                body.push_str(&format!("lockfile: the holder looks unhealthy: {why}\n"));
            }
            let suffix = if unhealthy.is_some() { "/fail" } else { "/log" };
            let done = self.send(suffix, body.into_bytes(), None);
            self.wait(done, suffix);
        }
    }

    fn report_once(reported: &AtomicBool, message: &str) {
        if !reported.swap(true, Ordering::SeqCst) {
            errln!("{message}");
        }
    }

    fn what_happened(outcome: Outcome) -> &'static str {
        match outcome {
            Outcome::TimedOut => "ran past its maximum runtime and was stopped",
            Outcome::Hung => "stopped proving progress and was stopped",
            Outcome::Evicted => "was stopped by a later run that judged it hung",
            Outcome::LeaseLost => "lost its lease and was stopped",
            _ => "failed",
        }
    }

    /// One ping, retried on what may pass: a timeout, a failed connection
    /// or name lookup, a 5xx answer. A 4xx answer or a bad URL will not.
    fn post(agent: &ureq::Agent, url: &str, body: &[u8]) -> Result<(), String> {
        let mut pause = FIRST_PAUSE;
        for attempt in 1..=ATTEMPTS {
            let passing = match agent.post(url).send(body) {
                Ok(answer) if answer.status().is_success() => return Ok(()),
                Ok(answer) if answer.status().is_server_error() => {
                    format!("the server answered {}", answer.status())
                }
                Ok(answer) => return Err(format!("the server answered {}", answer.status())),
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
            std::thread::sleep(pause);
            pause = pause.saturating_mul(2);
        }
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn urls_follow_the_protocol() {
            let mut p = Pinger::new("https://hc.example/ping/abc/", 0).unwrap();
            assert_eq!(p.url("/log"), "https://hc.example/ping/abc/log");
            p.rid = Some("T".to_owned());
            assert_eq!(p.url("/start"), "https://hc.example/ping/abc/start?rid=T");
            assert_eq!(p.url(""), "https://hc.example/ping/abc?rid=T");
            assert_eq!(p.url("/3"), "https://hc.example/ping/abc/3?rid=T");
            assert_eq!(p.url("/log"), "https://hc.example/ping/abc/log");
            let mut p = Pinger::new("http://h:8000/ping/key/slug?create=1#x", 0).unwrap();
            p.rid = Some("T".to_owned());
            assert_eq!(
                p.url("/fail"),
                "http://h:8000/ping/key/slug/fail?create=1&rid=T"
            );
        }

        #[test]
        fn a_url_that_is_not_http_is_a_usage_error_naming_it() {
            for url in ["ftp://h/x", "hc-ping.com/abc", "http://", "not a url"] {
                let err = Pinger::new(url, 0).unwrap_err();
                assert!(err.contains(&format!("`{url}`")), "{err}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_is_a_usage_error_where_there_is_no_http_client() {
        let mut args = crate::plain::defaults().monitoring;
        assert!(NoPing::from_args(&args).unwrap().is_none());
        args.ping = Some("http://h/x".to_owned());
        let err = NoPing::from_args(&args).unwrap_err();
        assert!(err.contains("`ping` feature"), "{err}");
    }
}
