//! The slot's pumps: what it asks the store for (adopting a lost answer's runs, the fires a
//! rate limit grants, the keys set aside), and the runs it takes in.

use super::*;

impl SlotActor {
    /// Pumps now if the core allows it (see `SlotCore::want_pump`).
    pub(super) fn pump(&mut self, ctx: &mut Context<Self>) {
        let capacity = self.capacity();
        let Some(start) = self.core.want_pump(capacity, self.topic.paused) else {
            return;
        };
        self.cancel_timer(ctx);
        self.publish_pumping();
        let now = self.rt.clock.now();
        let store = self.rt.store.clone();
        let (topic, slot, fence) = (self.topic.name.clone(), self.slot, self.fence);
        let limited = self.topic.max_fires_per_s.is_some();
        // Past the lead, the window: jobs due in it go out in this pump too.
        let (lead, window) = (self.lead(), self.window());
        let reach = lead.saturating_add(window);
        self.metrics
            .pump_lead
            .observe(crate::num::float(lead) / 1_000.0);
        let aside = self.set_aside(now);
        let aside_at = aside.keys.clone();
        let fut = async move {
            let adopted = match start.adopt_above {
                Some(above) => store.adopt(&topic, slot, fence, above).await?,
                None => Vec::new(),
            };
            // A rate-limited topic's pump hands out no more than the fires its bucket
            // grants, and gives back those it did not use.
            let want = crate::num::to_u32(capacity);
            let grant = if limited {
                store.take_fires(&topic, want, now).await?
            } else {
                crate::store::Grant::all(want)
            };
            if grant.granted == 0 {
                return Ok((adopted, Pumped::default(), grant));
            }
            let limit = usize::try_from(grant.granted).unwrap_or(capacity);
            let pumped = store
                .pump_setting_aside(&topic, slot, fence, now, reach, limit, &aside)
                .await?;
            let unused = grant.granted - crate::num::to_u32(pumped.jobs.len());
            if limited && unused > 0 {
                // Lost, it would only hold fires back for a twentieth of a second.
                let _ = store.give_back_fires(&topic, unused, now).await;
            }
            Ok::<_, crate::error::Error>((adopted, pumped, grant))
        };
        let asked = std::time::Instant::now();
        let asked_us = self.rt.clock.now_us();
        ctx.spawn(fut.into_actor(self).map(move |result, act, ctx| {
            let answered = std::time::Instant::now();
            let round_trip = answered.saturating_duration_since(asked);
            act.metrics.pump_seconds.observe(round_trip.as_secs_f64());
            let (end, next_at) = match result {
                Ok((adopted, pumped, grant)) => {
                    act.lead.observe(round_trip, answered);
                    let granted = usize::try_from(grant.granted).unwrap_or(0);
                    let held_back = granted < capacity && pumped.jobs.len() >= granted;
                    let full = pumped.jobs.len() >= capacity;
                    let next_at = pumped.next_at;
                    act.count_set_aside(&aside_at, &pumped.set_aside);
                    act.take_runs(adopted, pumped, asked_us, now, ctx);
                    let end = if held_back {
                        PumpEnd::Limited { retry_in_ms: grant.retry_in_ms }
                    } else {
                        PumpEnd::Leased { full }
                    };
                    (end, next_at)
                }
                Err(e @ crate::error::Error::Fenced { .. }) => {
                    tracing::info!(topic = %act.topic.name, slot = act.slot, error = %e, "another instance owns the slot now: pumping stops");
                    act.set_status(|s| {
                        s.last_error = Some(e.to_string());
                        s.fenced = true;
                    });
                    act.slot_changed();
                    (PumpEnd::Fenced, None)
                }
                Err(e) => {
                    tracing::warn!(topic = %act.topic.name, slot = act.slot, error = %e, "pump failed");
                    act.rt
                        .metrics
                        .pump_failures
                        .with_label_values(&[act.topic.name.as_str()])
                        .inc();
                    act.set_status(|s| s.last_error = Some(e.to_string()));
                    (PumpEnd::Failed, None)
                }
            };
            let after = act.core.pump_answered(end);
            act.publish_pumping();
            match after {
                AfterPump::PumpAgain => ctx.notify(Pump),
                // The store counts the next time back from the next fire time by the whole
                // reach; the slot pumps a lead before it (the lead as it stands now, which
                // this pump's round trip may have moved), so that the pump takes the window
                // that follows it.
                AfterPump::SleepUntilNext => {
                    let back = reach.saturating_sub(act.lead());
                    let next = next_at.map(|at| at.saturating_add(back));
                    // A wake told during the pump (rule 6 of `core.rs`).
                    let next = match (next, act.core.take_woken()) {
                        (Some(n), Some(w)) => Some(n.min(w)),
                        (n, w) => n.or(w),
                    };
                    act.arm(next, ctx);
                    act.offer_sleep();
                }
                AfterPump::SleepFor(wait) => {
                    let at = act.rt.clock.now().saturating_add(crate::num::millis(crate::num::duration_ms(wait)));
                    act.arm(Some(at), ctx);
                }
                AfterPump::Nothing => {}
            }
        }));
    }

    /// Takes in the runs a pump answered with: the adopted ones (a lost answer's, not yet
    /// running here) and the pumped ones, each to its handler now or held until its fire time.
    pub(super) fn take_runs(
        &mut self,
        adopted: Vec<Leased>,
        pumped: Pumped,
        asked_us: i64,
        now: Millis,
        ctx: &mut Context<Self>,
    ) {
        let now_us = self.rt.clock.now_us();
        let mut held = Vec::new();
        for lease in adopted {
            if !self.running.contains_key(&lease.job.id) {
                tracing::info!(topic = %self.topic.name, slot = self.slot, job = %lease.job.id, "running a job whose pump's answer was lost");
                self.core.saw_token(lease.token);
                self.dispatch(lease, now_us, &mut held, ctx);
            }
        }
        let n = pumped.jobs.len();
        self.set_status(|s| {
            s.last_pump = Some(now);
            s.last_error = None;
        });
        self.metrics
            .pump_batch
            .observe(crate::num::float(crate::num::signed(
                crate::num::usize_u64(n),
            )));
        // Due between the ask and the answer: late by the round trip past the lead.
        let after = pumped
            .jobs
            .iter()
            .filter(|lease| {
                (asked_us + 1..=now_us).contains(&lease.job.fire_at.saturating_mul(1_000))
            })
            .count();
        self.metrics
            .fired_after_pump
            .inc_by(crate::num::usize_u64(after));
        for lease in pumped.jobs {
            self.core.saw_token(lease.token);
            self.dispatch(lease, now_us, &mut held, ctx);
        }
        self.hold(held, ctx);
        self.track();
    }
}
