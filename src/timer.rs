//! Sleeping to the microsecond. Tokio's timer counts 1 ms ticks from the runtime's start and
//! rounds a deadline up to the next tick, and its driver waits in `epoll_wait` with a timeout
//! in whole ms, so a slot actor that sleeps until a job's fire time wakes 0 to 2 ms after it.
//! That is the largest part of the firing lateness of an idle service.
//!
//! [`sleep`] sleeps on Tokio's timer until shortly before the deadline, then hands the last
//! stretch to one thread of the process that waits on a condition variable (a futex with a
//! timeout in ns: the kernel's timer slack, 50 µs by default, is the error) and wakes the
//! sleeper through a oneshot channel. Only sleeps within that last stretch reach the thread,
//! so a sleep cancelled long before its deadline (the common case: a slot re-arms whenever
//! it learns of an earlier job) costs the thread nothing.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// How long before its deadline a sleep moves from Tokio's timer to the precise thread:
/// Tokio may wake up to 2 ms late, so a sleep handed over 3 ms early is never late.
const HANDOVER: Duration = Duration::from_millis(3);

/// Sleeps for `delay`, waking within tens of µs of its end rather than within ms.
pub(crate) async fn sleep(delay: Duration) {
    let deadline = Instant::now() + delay;
    if let Some(coarse) = delay.checked_sub(HANDOVER) {
        tokio::time::sleep(coarse).await;
    }
    if Instant::now() < deadline {
        Precise::get().wait(deadline).await;
    }
}

/// The precise thread's queue: deadlines in order, and who waits for each.
#[derive(Default)]
struct Queue {
    deadlines: BinaryHeap<Reverse<(Instant, u64)>>,
    waiters: HashMap<u64, oneshot::Sender<()>>,
    next_id: u64,
}

struct Precise {
    queue: Arc<(Mutex<Queue>, Condvar)>,
}

impl Precise {
    /// The process's one precise thread.
    fn get() -> &'static Precise {
        static PRECISE: OnceLock<Precise> = OnceLock::new();
        PRECISE.get_or_init(Precise::start)
    }

    fn start() -> Precise {
        let queue: Arc<(Mutex<Queue>, Condvar)> = Arc::default();
        let q = queue.clone();
        std::thread::Builder::new()
            .name("toc-precise-timer".into())
            .spawn(move || run(&q))
            .expect("start the precise timer thread");
        Precise { queue }
    }

    /// Resolves at `deadline` (or at once when the thread is gone).
    async fn wait(&self, deadline: Instant) {
        let (tx, rx) = oneshot::channel();
        let id = {
            let (lock, cv) = &*self.queue;
            let mut q = lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let id = q.next_id;
            q.next_id += 1;
            let sooner = q
                .deadlines
                .peek()
                .is_none_or(|Reverse((first, _))| deadline < *first);
            q.deadlines.push(Reverse((deadline, id)));
            q.waiters.insert(id, tx);
            if sooner {
                cv.notify_one();
            }
            id
        };
        // Dropped before its deadline (the sleep was cancelled): the thread skips it.
        let guard = Forget {
            queue: &self.queue,
            id,
        };
        let _ = rx.await;
        std::mem::forget(guard);
    }
}

/// Removes a cancelled sleep's waiter.
struct Forget<'a> {
    queue: &'a (Mutex<Queue>, Condvar),
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        let mut q = self
            .queue
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        q.waiters.remove(&self.id);
    }
}

/// The thread: wakes every waiter whose deadline has come, then sleeps until the next one.
fn run(queue: &(Mutex<Queue>, Condvar)) {
    let (lock, cv) = queue;
    let mut q = lock
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        let now = Instant::now();
        while let Some(&Reverse((at, id))) = q.deadlines.peek() {
            if at > now {
                break;
            }
            q.deadlines.pop();
            if let Some(tx) = q.waiters.remove(&id) {
                let _ = tx.send(());
            }
        }
        q = match q.deadlines.peek() {
            Some(&Reverse((at, _))) => {
                cv.wait_timeout(q, at - now)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0
            }
            None => cv
                .wait(q)
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sleep_never_ends_before_its_delay() {
        for ms in [0u64, 1, 2, 5] {
            let start = Instant::now();
            sleep(Duration::from_millis(ms)).await;
            assert!(start.elapsed() >= Duration::from_millis(ms), "{ms} ms");
        }
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_no_waiter_and_a_later_one_still_wakes() {
        let p = Precise::start();
        let waiters = || p.queue.0.lock().unwrap().waiters.len();
        let far = Instant::now() + Duration::from_secs(3_600);
        {
            let cancelled = p.wait(far);
            tokio::pin!(cancelled);
            // Polled once, so it is registered; then dropped before its deadline.
            assert!(futures_util::FutureExt::now_or_never(cancelled.as_mut()).is_none());
            assert_eq!(waiters(), 1);
        }
        assert_eq!(waiters(), 0, "a cancelled wait left its waiter behind");
        let deadline = Instant::now() + Duration::from_millis(1);
        p.wait(deadline).await;
        assert!(Instant::now() >= deadline, "woken before its deadline");
        assert_eq!(waiters(), 0, "a finished wait left its waiter behind");
    }
}
