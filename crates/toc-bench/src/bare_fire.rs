//! The burst's and the pull's floor on Redis: the least a fire or a claim + ack can cost
//! there. 16 plain sorted sets of due members (one per slot, as the topic has), drained by
//! two minimal Lua scripts: one takes due members into a lease set with a deadline, the
//! other, the ack, removes the member from the lease set and its record from a hash. None
//! of our features: no record read or written, no token, no event, no fence, no owner. A
//! run of ours can cost no less; the ratio says how far each of our figures is from
//! Redis's own limit, measured on the same Redis in the same run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use redis::aio::MultiplexedConnection;

use super::Ctx;
use super::scenarios::{RedisCpu, redis_conn, settle_lazyfree};
use timeout_center::time::now_ms;

const SLOTS: u32 = 16;

/// Takes up to ARGV[2] members due by ARGV[1] into the lease set with deadline ARGV[3].
const TAKE: &str = r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #due == 0 then return due end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #due - 1)
local leased = {}
for i, id in ipairs(due) do
  leased[2 * i - 1] = ARGV[3]
  leased[2 * i] = id
end
redis.call('ZADD', KEYS[2], unpack(leased))
return due
";

/// The ack: removes each member from the lease set and its record from the hash.
const ACK: &str = r"
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
return #ARGV
";

fn keys(slot: u32) -> [String; 3] {
    let tag = format!("toc:{{bench-bare-fire-{slot}}}");
    [
        format!("{tag}:due"),
        format!("{tag}:run"),
        format!("{tag}:job"),
    ]
}

/// The burst scenario with its floor: the service's burst (`scenarios::burst`), then the
/// same number of jobs drained by the bare scripts, a slot's pump batch at a time.
pub(super) async fn burst(ctx: &mut Ctx) -> Result<(), String> {
    super::scenarios::burst(ctx).await?;
    if ctx.stopped() {
        return Ok(());
    }
    super::scenarios::clear_bench_topics(ctx).await?;
    let n = ctx.sizes.burst_jobs;
    let batch = timeout_center::config::Settings::defaults()
        .runtime
        .pump_batch;
    let floor = "redis-server CPU per 100,000 fired, bare Lua floor";
    let rate = bare_drain(ctx, "burst", floor, n, batch).await?;
    ctx.add(
        "burst",
        "redis",
        "burst drain rate, bare Lua floor",
        rate,
        "jobs/s",
        &format!("the floor: {n} members of 16 plain sorted sets due at once, a worker a set taking {batch} into a lease set by a minimal script and acking them by another"),
    );
    Ok(())
}

/// The floor of draining `n` jobs due at one instant, taken `batch` at a time by one
/// worker per slot, each batch acked in one call: jobs a second, with redis-server's CPU per
/// 100,000 added as `figure` of `scenario`.
pub(super) async fn bare_drain(
    ctx: &mut Ctx,
    scenario: &'static str,
    figure: &str,
    n: usize,
    batch: usize,
) -> Result<f64, String> {
    let stop: Arc<AtomicBool> = ctx.stop.clone();
    let mut c = redis_conn(ctx).await?;
    settle_lazyfree(&mut c).await?;
    let e = |e: redis::RedisError| e.to_string();
    let due = now_ms();
    for first in (0..n).step_by(1_000) {
        let mut p = redis::pipe();
        let mut per_slot: Vec<redis::Cmd> = (0..SLOTS)
            .map(|s| {
                let mut cmd = redis::cmd("ZADD");
                cmd.arg(&keys(s)[0]);
                cmd
            })
            .collect();
        for i in first..n.min(first + 1_000) {
            let id = format!("b{i}");
            let s = crc32fast::hash(id.as_bytes()) % SLOTS;
            per_slot[s as usize].arg(due).arg(id);
        }
        for cmd in per_slot {
            if cmd.args_iter().count() > 2 {
                p.add_command(cmd);
            }
        }
        let _: () = p.query_async(&mut c).await.map_err(e)?;
    }
    let take = redis::Script::new(TAKE);
    let ack = redis::Script::new(ACK);
    let cpu = RedisCpu::start(ctx, "redis").await?;
    let started = Instant::now();
    let workers = (0..SLOTS).map(|slot| {
        let (mut c, take, ack, stop) = (c.clone(), &take, &ack, &stop);
        async move { drain_slot(&mut c, slot, batch, take, ack, stop).await }
    });
    let mut drained = 0;
    for r in futures_util::future::join_all(workers).await {
        drained += r?;
    }
    let rate = drained as f64 / started.elapsed().as_secs_f64();
    cpu.add(ctx, scenario, figure, drained as u64).await?;
    let all: Vec<String> = (0..SLOTS).flat_map(keys).collect();
    let _: () = redis::cmd("UNLINK")
        .arg(all)
        .query_async(&mut c)
        .await
        .map_err(e)?;
    Ok(rate)
}

/// One slot's worker: takes a batch, acks it, until the slot is empty.
async fn drain_slot(
    c: &mut MultiplexedConnection,
    slot: u32,
    batch: usize,
    take: &redis::Script,
    ack: &redis::Script,
    stop: &AtomicBool,
) -> Result<usize, String> {
    let [due, run, job] = keys(slot);
    let e = |e: redis::RedisError| e.to_string();
    let mut drained = 0;
    while !stop.load(Ordering::Relaxed) {
        let now = now_ms();
        let ids: Vec<String> = take
            .key(&due)
            .key(&run)
            .arg(now)
            .arg(batch)
            .arg(now + 30_000)
            .invoke_async(c)
            .await
            .map_err(e)?;
        if ids.is_empty() {
            break;
        }
        let _: i64 = ack
            .key(&run)
            .key(&job)
            .arg(&ids)
            .invoke_async(c)
            .await
            .map_err(e)?;
        drained += ids.len();
    }
    Ok(drained)
}
