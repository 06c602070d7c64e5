//! The wake bus on Redis: a notice that a slot has a job due sooner than its owner sleeps
//! for, published by the writer and heard by the owner. On one node (or behind Sentinel) a
//! plain channel per topic; on a Redis Cluster each slot's owner subscribes to the slot's
//! sharded channel, in the slot's hash tag, so the writer's `SPUBLISH` and the owner's
//! `SSUBSCRIBE` meet on the node that holds the slot's keys (the plain channel still carries
//! topic announcements and pull topics' notices).

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::ConnectionLike;
use redis::cluster_async::ClusterConnection;
use tokio::sync::mpsc;

use super::reply::text;
use super::{RedisEngine, SentinelConnection};
use crate::error::{Error, Result};
use crate::store::engine::WakeBus;
use crate::store::engine::WakeNotice;
use crate::store::keys::{parse_slot_wake_channel, slot_wake_channel, wake_channel};
use crate::topic::TopicConfig;

/// Where wake notices go and come from.
pub(super) enum Wakes {
    /// None heard (a connection made elsewhere, as tests make): notices are published only.
    None,
    /// Plain pub/sub on one node, or on the primary of the moment behind Sentinel.
    Plain(WakeClient),
    /// Sharded pub/sub on a Redis Cluster.
    Cluster(ClusterWakes),
}

/// Sharded pub/sub on a Redis Cluster. The connection resubscribes by itself after a loss or
/// a resharding.
pub(super) struct ClusterWakes {
    conn: ClusterConnection,
    pushes: std::sync::Mutex<Option<mpsc::UnboundedReceiver<redis::PushInfo>>>,
}

impl ClusterWakes {
    pub(super) fn new(
        conn: ClusterConnection,
        pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
    ) -> Self {
        ClusterWakes {
            conn,
            pushes: std::sync::Mutex::new(Some(pushes)),
        }
    }
}

/// Where the pub/sub connection for wake notices is made: one node, or whichever the
/// sentinels name the primary when it (re)connects.
pub(super) enum WakeClient {
    Fixed(Box<redis::Client>),
    Sentinel(SentinelConnection),
}

impl WakeClient {
    pub(super) fn client(&self) -> redis::Client {
        match self {
            WakeClient::Fixed(c) => (**c).clone(),
            WakeClient::Sentinel(s) => s.client(),
        }
    }
}

#[async_trait]
impl<C> WakeBus for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn announce(&self, notice: &WakeNotice) -> Result<()> {
        self.wakes.publish(&mut self.conn(), notice).await
    }

    async fn wake(&self, topic: &TopicConfig, notice: &WakeNotice) -> Result<()> {
        if topic.is_pull() {
            self.wakes.publish(&mut self.conn(), notice).await
        } else {
            self.wakes.publish_to_owner(&mut self.conn(), notice).await
        }
    }

    async fn watch_slot(&self, topic: &str, slot: u32, watch: bool) -> Result<()> {
        self.wakes.watch_slot(topic, slot, watch).await
    }

    async fn listen(&self, tx: mpsc::UnboundedSender<WakeNotice>) -> Result<()> {
        self.wakes.listen(tx).await
    }
}

impl Wakes {
    /// Tells every instance serving `notice.topic` (topic announcements, pull topics).
    pub(super) async fn publish<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        notice: &WakeNotice,
    ) -> Result<()> {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(wake_channel(&notice.topic))
            .arg(notice.encode())
            .query_async(conn)
            .await?;
        Ok(())
    }

    /// Tells the slot's owner: its sharded channel on a Cluster, the plain one elsewhere.
    pub(super) async fn publish_to_owner<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        notice: &WakeNotice,
    ) -> Result<()> {
        if !matches!(self, Wakes::Cluster(_)) {
            return self.publish(conn, notice).await;
        }
        let channel = slot_wake_channel(&notice.topic, notice.slot);
        let _: i64 = redis::cmd("SPUBLISH")
            .arg(channel)
            .arg(notice.encode())
            .query_async(conn)
            .await?;
        Ok(())
    }

    /// Starts (or stops) hearing a slot's sharded channel, on a Cluster; a plain channel
    /// is heard whole.
    pub(super) async fn watch_slot(&self, topic: &str, slot: u32, watch: bool) -> Result<()> {
        let Wakes::Cluster(wakes) = self else {
            return Ok(());
        };
        let mut conn = wakes.conn.clone();
        let channel = slot_wake_channel(topic, slot);
        if watch {
            conn.ssubscribe(channel).await?;
        } else {
            conn.sunsubscribe(channel).await?;
        }
        Ok(())
    }

    /// Hears notices into `tx` until it closes, reconnecting after a loss.
    pub(super) async fn listen(&self, tx: mpsc::UnboundedSender<WakeNotice>) -> Result<()> {
        let source = match self {
            Wakes::None => {
                return Err(Error::Unavailable(
                    "a store made on a connection of its own hears no wake notices".into(),
                ));
            }
            Wakes::Cluster(wakes) => return listen_cluster(wakes, tx).await,
            Wakes::Plain(source) => source,
        };
        // Reconnects after a loss (to the primary of the moment, behind Sentinel), until
        // the receiver is gone.
        while !tx.is_closed() {
            match listen_once(&source.client(), &tx).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(error = %e, "wake notices: connection lost, reconnecting");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        Ok(())
    }
}

async fn listen_once(client: &redis::Client, tx: &mpsc::UnboundedSender<WakeNotice>) -> Result<()> {
    use futures_util::StreamExt;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.psubscribe(wake_channel("*")).await?;
    // Subscribed (again): whatever was published while no connection listened is read
    // from the slots' heads.
    if tx.send(WakeNotice::resync()).is_err() {
        return Ok(());
    }
    let prefix = wake_channel("");
    let mut messages = pubsub.on_message();
    while let Some(msg) = messages.next().await {
        let channel = msg.get_channel_name().to_string();
        let payload: String = msg.get_payload().unwrap_or_default();
        let Some(topic) = channel.strip_prefix(&prefix) else {
            continue;
        };
        if let Some(notice) = WakeNotice::decode(topic, &payload)
            && tx.send(notice).is_err()
        {
            return Ok(());
        }
    }
    Err(Error::Unavailable("the pub/sub connection closed".into()))
}

/// Wake notices on a Redis Cluster: the plain channels (topic announcements, pull topics'
/// notices; a plain PUBLISH reaches every node) and the watched slots' sharded ones.
async fn listen_cluster(wakes: &ClusterWakes, tx: mpsc::UnboundedSender<WakeNotice>) -> Result<()> {
    let pushes = wakes
        .pushes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let Some(mut pushes) = pushes else {
        return Err(Error::Unavailable(
            "wake notices are heard by one listener only".into(),
        ));
    };
    wakes.conn.clone().psubscribe(wake_channel("*")).await?;
    let prefix = wake_channel("");
    while let Some(push) = pushes.recv().await {
        let notice = match (push.kind, push.data.as_slice()) {
            (redis::PushKind::SMessage, [channel, payload]) => {
                let (channel, payload) = (text(channel)?, text(payload)?);
                parse_slot_wake_channel(&channel)
                    .and_then(|(topic, _)| WakeNotice::decode(topic, &payload))
            }
            (redis::PushKind::PMessage, [_, channel, payload]) => {
                let (channel, payload) = (text(channel)?, text(payload)?);
                channel
                    .strip_prefix(&prefix)
                    .and_then(|topic| WakeNotice::decode(topic, &payload))
            }
            // A connection lost (the connection resubscribes by itself) or the pattern
            // subscribed (again): notices may have been lost meanwhile, so the slots' heads
            // are read anew.
            (redis::PushKind::Disconnection | redis::PushKind::PSubscribe, _) => {
                Some(WakeNotice::resync())
            }
            _ => None,
        };
        if let Some(notice) = notice
            && tx.send(notice).is_err()
        {
            return Ok(());
        }
    }
    Err(Error::Unavailable(
        "the cluster's pub/sub connection closed".into(),
    ))
}
