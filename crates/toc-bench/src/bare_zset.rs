//! The scale scenario's floor on Redis: the same heartbeats as raw `ZADD XX CH` on bare
//! sorted sets, one per slot of the topic (16, each device in the slot its id routes to),
//! filled with as many devices as the topic held and spread over the hour alike. What
//! redis-server's own sorted set costs at that size, measured on the same Redis in the same
//! run: a library reset can cost no less, and a drop with size that the bare sets show too
//! is the server's (its dict and skiplist missing the cache), not the service's.

use std::sync::atomic::AtomicBool;

use redis::aio::MultiplexedConnection;

use super::Ctx;
use super::scenarios::{Span, paced_heartbeats, redis_conn, settle_lazyfree};
use timeout_center::time::{Millis, now_ms};

const SLOTS: u32 = 16;

fn key(slot: u32) -> String {
    format!("toc:{{bench-bare}}:{slot}")
}

/// One pipeline of `ZADD` (with `flags`), a command per slot, for devices `ids` at `at(i)`.
fn batch(
    ids: std::ops::Range<usize>,
    flags: &[&str],
    at: impl Fn(usize) -> Millis,
) -> redis::Pipeline {
    let mut per_slot: Vec<redis::Cmd> = (0..SLOTS)
        .map(|s| {
            let mut c = redis::cmd("ZADD");
            c.arg(key(s)).arg(flags);
            c
        })
        .collect();
    let mut used = [false; SLOTS as usize];
    for i in ids {
        let id = format!("dev-{i}");
        let s = crc32fast::hash(id.as_bytes()) % SLOTS;
        per_slot[s as usize].arg(at(i)).arg(id);
        used[s as usize] = true;
    }
    let mut p = redis::pipe();
    for (c, used) in per_slot.into_iter().zip(used) {
        if used {
            p.add_command(c);
        }
    }
    p
}

/// Fills the bare sets with `n` devices, runs one heartbeat of every device (batches of 1,000
/// consecutive devices to an hour from now, 4 in flight, as `heartbeats` does) and measures
/// `secs` seconds more, removes the sets, and gives resets per second of the measured seconds.
pub(super) async fn bare_resets(
    ctx: &Ctx,
    n: usize,
    secs: u64,
    stop: &AtomicBool,
) -> Result<f64, String> {
    let mut c = redis_conn(ctx).await?;
    // The topic the service measured was just removed: its memory is freed in the
    // background, which would share the machine with this fill and its heartbeats.
    settle_lazyfree(&mut c).await?;
    let e = |e: redis::RedisError| e.to_string();
    let start = now_ms() + 3_600_000;
    for first in (0..n).step_by(1_000) {
        let ids = first..n.min(first + 1_000);
        let _: () = batch(ids, &[], |i| start + (i % 3_600_000) as i64)
            .query_async(&mut c)
            .await
            .map_err(e)?;
    }
    // An unmeasured first round of the whole fleet, as the service's library line has one.
    heartbeats(&c, n, Span::Fleet, stop).await;
    let rate = heartbeats(&c, n, Span::Seconds(secs), stop).await;
    let _: () = redis::cmd("UNLINK")
        .arg((0..SLOTS).map(key).collect::<Vec<_>>())
        .query_async(&mut c)
        .await
        .map_err(e)?;
    settle_lazyfree(&mut c).await?;
    Ok(rate)
}

async fn heartbeats(c: &MultiplexedConnection, n: usize, span: Span, stop: &AtomicBool) -> f64 {
    paced_heartbeats(n, span, stop, |ids, at| {
        let mut c = c.clone();
        async move {
            let sent = ids.len() as u64;
            let p = batch(ids, &["XX", "CH"], |_| at);
            match p.query_async::<Vec<u64>>(&mut c).await {
                Ok(_) => sent,
                Err(_) => 0,
            }
        }
    })
    .await
}
