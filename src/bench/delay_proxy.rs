//! A TCP proxy on loopback that adds a fixed round trip to every exchange with its upstream,
//! half on the way there and half on the way back, as a network between a client and a
//! Redis does: a store whose round trip is slow, without a mock (`toc bench
//! --redis-delay-ms`, and the tests of the lead). Each chunk leaves half the delay after it
//! arrived, in order, so requests and replies keep their order and a pipeline its rate.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// A running proxy; it stops with the runtime that started it.
pub struct DelayProxy {
    pub addr: SocketAddr,
}

impl DelayProxy {
    /// Proxies a listener on a free loopback port to `upstream`, adding `delay` to each round
    /// trip.
    pub async fn start(upstream: SocketAddr, delay: Duration) -> std::io::Result<DelayProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, upstream, delay));
            }
        });
        Ok(DelayProxy { addr })
    }

    /// A `redis://` URL through the proxy.
    pub fn redis_url(&self) -> String {
        format!("redis://{}/", self.addr)
    }
}

async fn relay(client: TcpStream, upstream: SocketAddr, delay: Duration) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_rd, client_wr) = client.into_split();
    let (server_rd, server_wr) = server.into_split();
    let half = delay / 2;
    tokio::spawn(delayed_copy(client_rd, server_wr, half));
    delayed_copy(server_rd, client_wr, delay - half).await;
}

/// Copies `from` to `to`, each chunk `delay` after it was read, until either side closes.
async fn delayed_copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf).await {
            if tx
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
            {
                return;
            }
        }
    });
    while let Some((at, bytes)) = rx.recv().await {
        tokio::time::sleep_until(at).await;
        if to.write_all(&bytes).await.is_err() {
            return;
        }
    }
}
