//! No team holds another back: webhook calls in flight are shared fairly between topics and
//! between the flow keys of a topic (`webhooks.max_in_flight`, `…_per_topic`, `…_per_key`).
//!
//! Against a real `toc serve` on each engine: 1,000 webhook jobs of one topic to a tarpit (an
//! endpoint that accepts connections and never answers), then another topic's webhook due a
//! second later. What this proves: the tarpit holds no more than one key's share of the
//! instance's calls, and the other topic's call arrives within 1 s of its time while the
//! tarpit's jobs wait. What it cannot: fairness between instances (each instance holds its
//! own shares), or a receiver that answers slowly rather than never (the same permits are
//! held either way).

mod common;

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::common::runtime::eventually;
use common::RedisServer;
use common::process::{Receiver, Skew, Toc, redis_env, wall_us};

/// An endpoint that accepts every connection and never answers; counts what it holds.
struct Tarpit {
    port: u16,
    held: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
}

impl Tarpit {
    fn start() -> Tarpit {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (held.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => h.lock().unwrap().push(stream),
                    // A poll of the listener, every 5 ms of real time, until the test drops it.
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Tarpit { port, held, stop }
    }

    fn held(&self) -> usize {
        self.held.lock().unwrap().len()
    }
}

impl Drop for Tarpit {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

async fn one_tarpit_holds_only_its_share(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let redis = (engine == "redis").then(RedisServer::start);
    let env = redis.as_ref().map_or(Vec::new(), |r| redis_env(r.url()));
    let toc = Toc::start(engine, &env, Skew::None, dir.path()).await;
    let http = reqwest::Client::new();
    let tarpit = Tarpit::start();
    let receiver = Receiver::start();
    for topic in ["slow", "fast"] {
        toc.put_topic(&http, topic, json!({"default_type": "webhook"}))
            .await;
    }
    // 1,000 calls that each ask to wait 20 s for an answer that never comes.
    let job = json!({"delay_ms": 0, "payload": {
        "url": format!("http://127.0.0.1:{}/hang", tarpit.port),
        "timeout_ms": 20_000,
    }});
    for i in 0..1_000 {
        toc.put_job(&http, "slow", &format!("t{i}"), &job).await;
    }
    // The tarpit fills its share (a key's: 8 by default)...
    eventually(20, || async {
        match tarpit.held() {
            n if n >= 8 => Ok(()),
            n => Err(format!("the tarpit holds {n} calls")),
        }
    })
    .await;
    // ...and another team's call, due a second from now, arrives on time.
    let fire_at = wall_us() / 1000 + 1_000;
    toc.put_job(
        &http,
        "fast",
        "other-team",
        &json!({"fire_at": fire_at, "payload": {"url": receiver.url(), "body": {"id": "other-team"}}}),
    )
    .await;
    let seen = receiver.wait_for(1, Duration::from_secs(15)).await;
    let arrived = seen.get("other-team").and_then(|a| a.first()).copied();
    let late_ms = arrived.map(|us| us / 1000 - fire_at);
    assert!(
        late_ms.is_some_and(|l| (0..1_000).contains(&l)),
        "{engine}: the other topic's call arrived {late_ms:?} ms after its time, the tarpit holding {}",
        tarpit.held()
    );
    assert!(
        tarpit.held() <= 8,
        "{engine}: the tarpit holds {} calls, more than a key's share",
        tarpit.held()
    );
    eprintln!(
        "{engine}: the other topic's call arrived {} ms after its time; the tarpit held {} of 64",
        late_ms.unwrap_or_default(),
        tarpit.held()
    );
}

#[actix_rt::test]
async fn a_tarpit_holds_only_its_share_on_memory() {
    one_tarpit_holds_only_its_share("memory").await;
}

#[actix_rt::test]
async fn a_tarpit_holds_only_its_share_on_redis() {
    one_tarpit_holds_only_its_share("redis").await;
}
