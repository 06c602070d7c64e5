//! The real HTTP service for a test: `serve::start` on port 0 over a real Redis.

use std::net::SocketAddr;

use actix_web::dev::ServerHandle;
use timeout_center::TimeoutCenter;
use timeout_center::config::{Settings, StoreKind};
use timeout_center::serve;

use super::RedisServer;

pub struct Service {
    pub addr: SocketAddr,
    pub center: TimeoutCenter,
    pub handle: ServerHandle,
    pub http: reqwest::Client,
}

impl Service {
    pub async fn start(redis: &RedisServer, tweak: impl FnOnce(&mut Settings)) -> Service {
        let mut settings = Settings::defaults();
        settings.store = StoreKind::Redis;
        settings.redis.url = redis.url();
        settings.listen = "127.0.0.1:0".parse().unwrap();
        tweak(&mut settings);
        Service::start_with(settings).await
    }

    pub async fn start_with(settings: Settings) -> Service {
        let store = serve::open_store(&settings).await.expect("the store opens");
        let running = serve::start(settings, store)
            .await
            .expect("the service starts");
        let (addr, center, handle) = (running.addr, running.center.clone(), running.handle());
        actix_rt::spawn(async move {
            let _ = running.run().await;
        });
        Service {
            addr,
            center,
            handle,
            http: reqwest::Client::new(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The text `GET path` answers (`/metrics`), whatever its status.
    pub async fn text(&self, path: &str) -> String {
        let res = self.http.get(self.url(path)).send().await;
        res.expect("the service answers").text().await.unwrap()
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut req = self.http.request(method, self.url(path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("the service answers");
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        let value = if text.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
        };
        (status, value)
    }
}
