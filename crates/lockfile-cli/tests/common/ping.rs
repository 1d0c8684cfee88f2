//! A loopback HTTP server that records every ping, answering as a
//! healthchecks server does: for `--ping` tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::wait_until;

/// How the recording server answers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Answer {
    Ok,
    Error500,
    /// 413 to a request with a body, 200 to one without.
    RefuseBodies,
    Never,
}

/// What the server does with a body, as the healthchecks server's
/// `ping()` view does: it keeps the head, up to its limit, which it
/// announces in a `Ping-Body-Limit` header; with keyword filtering on,
/// it decodes what it kept as UTF-8, and fails (500) when it cannot;
/// and its framework refuses (400) a body over 2.5 MiB.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Behaviour {
    pub(crate) answer: Answer,
    pub(crate) limit: usize,
    pub(crate) filter: bool,
}

/// The server framework's upload limit (Django's default).
pub(crate) const UPLOAD_LIMIT: usize = 2_621_440;

/// One request the server received.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) target: String,
    /// What the server kept: the head of what was sent.
    pub(crate) body: String,
    /// The length of what was sent.
    pub(crate) sent: usize,
}

/// An HTTP server on loopback that records every request.
pub(crate) struct Server {
    pub(crate) port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    pub(crate) fn start(answer: Answer) -> Server {
        Server::behaving(Behaviour {
            answer,
            limit: 10_000,
            filter: false,
        })
    }

    pub(crate) fn behaving(behaviour: Behaviour) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (requests, stop) = (Arc::clone(&requests), Arc::clone(&stop));
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let (requests, stop) = (Arc::clone(&requests), Arc::clone(&stop));
                    std::thread::spawn(move || serve(stream, behaviour, &requests, &stop));
                }
            });
        }
        Server {
            port,
            requests,
            stop,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/ping/abc", self.port)
    }

    pub(crate) fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// The requests, once `n` have come (the wrapper waits for its final
    /// ping, but a start ping it gave up waiting for may still be retried).
    pub(crate) fn wait_for(&self, n: usize) -> Vec<Request> {
        wait_until(&format!("{n} requests"), || self.requests().len() >= n);
        self.requests()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(
    stream: TcpStream,
    behaviour: Behaviour,
    requests: &Mutex<Vec<Request>>,
    stop: &AtomicBool,
) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or_default().to_owned(),
        parts.next().unwrap_or_default().to_owned(),
    );
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let kept = &body[..body.len().min(behaviour.limit)];
    requests.lock().unwrap().push(Request {
        method,
        target,
        body: String::from_utf8_lossy(kept).into_owned(),
        sent: body.len(),
    });
    let mut stream = reader.into_inner();
    let answer = |status: &str| {
        format!(
            "HTTP/1.1 {status}\r\nPing-Body-Limit: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            behaviour.limit
        )
    };
    let status = if body.len() > UPLOAD_LIMIT {
        "400 Bad Request"
    } else if behaviour.filter && std::str::from_utf8(kept).is_err() {
        "500 Internal Server Error"
    } else {
        match behaviour.answer {
            Answer::Ok => "200 OK",
            Answer::Error500 => "500 Internal Server Error",
            Answer::RefuseBodies if !body.is_empty() => "413 Payload Too Large",
            Answer::RefuseBodies => "200 OK",
            Answer::Never => {
                // Holds the connection, answering nothing, for a minute at most.
                for _ in 0..1200 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                return;
            }
        }
    };
    let _ = stream.write_all(answer(status).as_bytes());
}
