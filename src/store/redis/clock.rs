//! Redis' clock, read in the background: a `TIME` every second, each reply bounded by the
//! round trip that carried it (`crate::time::ServerClock`). The runtime's `now` comes from
//! here, so every instance sharing one Redis judges time alike whatever its own clock says;
//! `pump.lua` also reads `TIME` itself and never takes a job its node's clock has not
//! reached.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;

use crate::error::{Error, Result};
use crate::time::{ClockSample, ServerClock};

/// How often the sampler reads Redis' clock.
const EVERY: Duration = Duration::from_secs(1);

/// One reading of the server's clock.
pub(super) async fn sample<C: ConnectionLike + Send>(conn: &mut C) -> Result<ClockSample> {
    let sent = Instant::now();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await?;
    let received = Instant::now();
    let server_us = secs
        .checked_mul(1_000_000)
        .and_then(|us| us.checked_add(micros))
        .ok_or_else(|| Error::Corrupt(format!("TIME answered {secs} s {micros} µs")))?;
    Ok(ClockSample {
        sent,
        server_us,
        received,
    })
}

/// Reads the server's clock every second for as long as `clock` is used; failures are
/// skipped (the samples kept go on bounding it). Outside a Tokio runtime nothing is spawned
/// and the clock stands on its steady fallback.
pub(super) fn spawn_sampler<C>(conn: C, clock: &Arc<ServerClock>)
where
    C: ConnectionLike + Send + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let clock: Weak<ServerClock> = Arc::downgrade(clock);
    let mut conn = conn;
    runtime.spawn(async move {
        loop {
            let read = sample(&mut conn).await;
            let Some(clock) = clock.upgrade() else { return };
            match read {
                Ok(s) => clock.observe(s),
                Err(e) => tracing::debug!(error = %e, "could not read Redis' clock"),
            }
            drop(clock);
            tokio::time::sleep(EVERY).await;
        }
    });
}
