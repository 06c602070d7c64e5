//! Appends events to the store in batches, off the path that settles runs: a settled run
//! hands its events over and moves on, and one writer per runtime appends whatever has
//! gathered (up to 1,000 events) in one call per topic, in the order they came.

use std::collections::BTreeMap;

use tokio::sync::{mpsc, oneshot};

use crate::events::Event;
use crate::store::SharedStore;

/// Most events one append carries.
const BATCH: usize = 1_000;

enum Msg {
    Events(String, Vec<Event>),
    Flush(oneshot::Sender<()>),
}

#[derive(Clone)]
pub struct EventWriter {
    tx: mpsc::UnboundedSender<Msg>,
}

impl EventWriter {
    /// Starts the writer task (inside an actix system or tokio runtime).
    pub fn start(store: SharedStore, max_len: usize) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel();
        actix_rt::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch: BTreeMap<String, Vec<Event>> = BTreeMap::new();
                let mut acks = Vec::new();
                let mut count = 0;
                let mut next = Some(first);
                while let Some(msg) = next.take() {
                    match msg {
                        Msg::Events(topic, events) => {
                            count += events.len();
                            batch.entry(topic).or_default().extend(events);
                        }
                        Msg::Flush(ack) => acks.push(ack),
                    }
                    if count < BATCH {
                        next = rx.try_recv().ok();
                    }
                }
                for (topic, events) in batch {
                    if let Err(e) = store.append_events(&topic, &events, max_len).await {
                        tracing::warn!(topic, error = %e, lost = events.len(), "could not append events");
                    }
                }
                for ack in acks {
                    let _ = ack.send(());
                }
            }
        });
        EventWriter { tx }
    }

    pub fn send(&self, topic: &str, events: Vec<Event>) {
        if !events.is_empty() {
            let _ = self.tx.send(Msg::Events(topic.to_string(), events));
        }
    }

    /// Waits until every event sent before this call is appended.
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.tx.send(Msg::Flush(ack)).is_ok() {
            let _ = done.await;
        }
    }
}
