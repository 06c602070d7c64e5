//! The keeper's discovery: a topic is served once this instance knows it (from its own
//! calls, another instance's notice, or the periodic listing of every topic).

use std::sync::Arc;

use actix::prelude::*;

use super::SlotKeeper;
use crate::actors::messages::Retune;
use crate::topic::TopicConfig;

impl SlotKeeper {
    /// Stops serving a deleted topic: its slot actors stop, and it is forgotten (a topic of
    /// the same name made later is served anew).
    pub(super) fn unserve(&mut self, topic: &str) {
        if self.topics.remove(topic).is_none() {
            return;
        }
        let slots: Vec<u32> = self
            .slots
            .keys()
            .filter(|(name, _)| name == topic)
            .map(|(_, slot)| *slot)
            .collect();
        for slot in slots {
            self.stop(topic, slot);
        }
        tracing::info!(%topic, "the topic is deleted: its slots are no longer served");
    }

    /// Serves a topic: its settings reach its slot actors, and the slots this instance
    /// should own are taken (at once for a topic new here or grown).
    pub(super) fn serve(&mut self, ctx: &mut Context<Self>, topic: Arc<TopicConfig>) {
        if self.stopping {
            return;
        }
        if topic.is_pull() {
            // Consumers claim a pull topic's jobs: no slot actor pumps it. A topic made a pull
            // topic has its slots handed off: their runs end or are given back within the
            // drain's grace (halted, the actors dropped them until their leases ran out).
            self.topics.remove(&topic.name);
            let gone: Vec<u32> = self.slots_of(&topic.name).map(|(slot, _)| slot).collect();
            for slot in gone {
                self.hand_off(ctx, &topic, slot);
            }
            return;
        }
        let before = self.topics.insert(topic.name.clone(), topic.clone());
        // Each discovery round serves every topic again: only a change is told to the slots.
        if before.as_ref() != Some(&topic) {
            // A sleeping slot's next actor reads the settings when it starts; one being asked
            // to sleep hears them if it answers busy.
            for key in self
                .slots_of(&topic.name)
                .map(|(slot, _)| (topic.name.clone(), slot))
                .collect::<Vec<_>>()
            {
                if let Some(entry) = self.slots.get_mut(&key) {
                    match (&entry.addr, &mut entry.asking) {
                        (Some(_), Some(asking)) => asking.retuned = true,
                        (Some(addr), None) => addr.do_send(Retune(topic.clone())),
                        (None, _) => {}
                    }
                }
            }
        }
        // Which instances may own the slots follows the count and the types the topic names.
        if before.is_none_or(|b| b.slots != topic.slots || !b.needs().eq(topic.needs())) {
            self.own_slots(ctx, &topic);
        }
    }

    pub(super) fn discover(&mut self, ctx: &mut Context<Self>) {
        let store = self.rt.store.clone();
        ctx.spawn(
            async move { store.topics().await }.into_actor(self).map(
                |topics, act, ctx| match topics {
                    Ok(topics) => {
                        for t in topics {
                            if t.draining_from.is_some() {
                                act.sweep(ctx, &t);
                            }
                            act.serve(ctx, t);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "could not list topics"),
                },
            ),
        );
    }
}
