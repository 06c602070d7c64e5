//! The tests' one way to wait. A state seen only from outside (a process's health, the
//! store, a metric, a receiver's log) has no notice to await: [`eventually`] checks it until
//! it holds, within a bound. An absence is shown only by a span in which, left alone, the
//! thing would have happened: [`quiet`] lets that span pass, and its caller says what real
//! duration it stands for. Nothing else in `tests/` sleeps.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`eventually`] checks.
const EVERY: Duration = Duration::from_millis(5);

/// Checks `probe` every 5 ms until it answers `Ok`, and answers that; fails with its last
/// `Err` after `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match probe().await {
            Ok(found) => return found,
            Err(why) => assert!(Instant::now() < deadline, "not within {secs} s: {why}"),
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// [`eventually`] with a probe that answers only whether it holds: `what` names it in the
/// failure.
pub async fn until<F, Fut>(secs: u64, what: &str, mut holds: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually(secs, || {
        let checked = holds();
        async move {
            if checked.await {
                Ok(())
            } else {
                Err(format!("{what} did not happen"))
            }
        }
    })
    .await
}

/// Whether `holds` comes to hold within `secs` seconds, checked every 5 ms: for a test that
/// asserts either answer (a case where it must, and one where it must not).
pub async fn holds_within<F, Fut>(secs: u64, mut holds: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if holds().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// Lets `ms` of wall time pass: for a test about to show that something did not happen
/// (no run before its time, no second run), or that needs a real span to go by (a lease to
/// run out, a rate's period). Each caller says what the span stands for.
pub async fn quiet(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}
