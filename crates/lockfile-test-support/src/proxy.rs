//! A loopback TCP proxy that can turn into a black hole: it stops forwarding
//! in both directions but keeps every socket open, so neither side sees an
//! error, only silence. The network fault a lease must survive.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Proxy {
    addr: SocketAddr,
    blackhole: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

const TICK: Duration = Duration::from_millis(10);

impl Proxy {
    /// Forwards a new loopback port to `target` (`host:port`).
    pub fn start(target: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("proxy address");
        let blackhole = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let target = target.to_owned();
        let acceptor = {
            let (blackhole, stop) = (Arc::clone(&blackhole), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut held = Vec::new();
                let mut pumps = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((client, _)) if blackhole.load(Ordering::SeqCst) => held.push(client),
                        Ok((client, _)) => {
                            let Ok(server) = TcpStream::connect(&target) else {
                                continue;
                            };
                            for (from, to) in [
                                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                                (server, client),
                            ] {
                                let (blackhole, stop) = (Arc::clone(&blackhole), Arc::clone(&stop));
                                pumps.push(std::thread::spawn(move || {
                                    pump(from, to, &blackhole, &stop);
                                }));
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(TICK),
                        Err(_) => std::thread::sleep(TICK),
                    }
                }
                for pump in pumps {
                    let _ = pump.join();
                }
                drop(held);
            })
        };
        Proxy {
            addr,
            blackhole,
            stop,
            acceptor: Some(acceptor),
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on nothing is forwarded, and nothing is closed.
    pub fn blackhole(&self) {
        self.blackhole.store(true, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until the black hole opens (then holds both sockets
/// open, reading nothing) or the proxy stops.
fn pump(mut from: TcpStream, mut to: TcpStream, blackhole: &AtomicBool, stop: &AtomicBool) {
    from.set_read_timeout(Some(TICK)).expect("read timeout");
    let mut buf = [0u8; 16 * 1024];
    while !stop.load(Ordering::SeqCst) {
        if blackhole.load(Ordering::SeqCst) {
            std::thread::sleep(TICK);
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                // Bytes read in the instant the black hole opened are dropped,
                // as a dead network would.
                if blackhole.load(Ordering::SeqCst) || to.write_all(&buf[..n]).is_err() {
                    continue;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    if !stop.load(Ordering::SeqCst) {
        let _ = to.shutdown(std::net::Shutdown::Write);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}
