//! A TCP proxy on loopback that holds every reply of its upstream a fixed time before passing
//! it on: a store whose round trip is slow, as a loaded or distant Redis's is, without a mock
//! (`toc bench --redis-delay-ms`, and the tests of the lead).
//! Requests go through at once; each chunk of a reply leaves `delay` after it arrived, in
//! order, so replies keep their order and a pipeline keeps its rate.

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
    /// Proxies a listener on a free loopback port to `upstream`, holding replies `delay`.
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
    let (mut client_rd, mut client_wr) = client.into_split();
    let (mut server_rd, mut server_wr) = server.into_split();
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_rd, &mut server_wr).await;
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = server_rd.read(&mut buf).await {
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
        if client_wr.write_all(&bytes).await.is_err() {
            return;
        }
    }
}
