//! Waiting for a future by parking the calling thread: how the blocking
//! calls (`wait`, `release`, `record_outcome`) wait for the lease's thread
//! to answer.
//!
//! Not an executor: the futures waited for here are channel receivers,
//! answered by the lease's own thread, so nothing has to be driven but the
//! wake-up. It works on any thread, including a runtime's worker (which it
//! blocks, as every blocking call does), where tokio's own `blocking_recv`
//! would panic.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on this thread, parking between wake-ups, until it is
/// ready.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        // A spurious wake-up only costs another poll.
        thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_an_answer_from_another_thread() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sender = thread::spawn(move || {
            thread::sleep(std::time::Duration::from_millis(20));
            tx.send(7).unwrap();
        });
        assert_eq!(block_on(rx).unwrap(), 7);
        sender.join().unwrap();
    }

    #[test]
    fn works_on_a_runtime_worker() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let answer = runtime.block_on(async {
            let (tx, rx) = tokio::sync::oneshot::channel();
            thread::spawn(move || tx.send("answered").unwrap());
            block_on(rx)
        });
        assert_eq!(answer.unwrap(), "answered");
    }
}
