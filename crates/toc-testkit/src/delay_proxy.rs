//! A TCP proxy on loopback that adds a fixed round trip to every exchange with its upstream,
//! half on the way there and half on the way back, as a network between a client and a
//! Redis does: a store whose round trip is slow, without a mock (`toc bench
//! --redis-delay-ms`, and the tests of the lead). Each chunk leaves half the delay after it
//! arrived, in order, so requests and replies keep their order and a pipeline its rate. It
//! runs on threads of its own, which sleep to the microsecond: Tokio's timer would round
//! each half up to its 1 ms ticks, and wait on the runtime it shares with what it measures.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A running proxy; its threads live as long as the process.
pub struct DelayProxy {
    pub addr: SocketAddr,
}

impl DelayProxy {
    /// Proxies a listener on a free loopback port to `upstream`, adding `delay` to each round
    /// trip.
    pub fn start(upstream: SocketAddr, delay: Duration) -> std::io::Result<DelayProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        thread::Builder::new()
            .name("delay-proxy".into())
            .spawn(move || {
                for client in listener.incoming().flatten() {
                    thread::spawn(move || relay(client, upstream, delay));
                }
            })?;
        Ok(DelayProxy { addr })
    }

    /// A `redis://` URL through the proxy.
    pub fn redis_url(&self) -> String {
        format!("redis://{}/", self.addr)
    }
}

fn relay(client: TcpStream, upstream: SocketAddr, delay: Duration) {
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(client_wr), Ok(server_wr)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let half = delay / 2;
    thread::spawn(move || delayed_copy(client, server_wr, half));
    delayed_copy(server, client_wr, delay - half);
}

/// Copies `from` to `to`, each chunk `delay` after it was read, until either side closes.
fn delayed_copy(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            if tx
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
            {
                return;
            }
        }
    });
    while let Ok((at, bytes)) = rx.recv() {
        let now = Instant::now();
        if at > now {
            thread::sleep(at - now);
        }
        if to.write_all(&bytes).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
