//! The store's listings, dead letters, counts and events.

use super::MAX_PAGE;
use crate::error::{Error, Result};
use crate::events::{Event, EventPage};
use crate::model::{DeadCursor, DeadPage, JobPage, JobRef, JobState, ListCursor, TopicStats};
use crate::store::engine::SlotRef;
use crate::store::engine::{DeadEntry, Range, Stored};
use crate::store::event_id::EventId;
use crate::time::Millis;
use crate::topic::TopicConfig;

use super::Store;

/// One slot's place in a listing's merge: where its next jobs start, and whether it has
/// no more.
struct Lane {
    slot: u32,
    after: Option<ListCursor>,
    done: bool,
}

/// What a listing asks for: the jobs in `state` (scheduled or running) with a score (fire
/// time; lease deadline for running jobs) from `from` to `to`, after `cursor` (a previous
/// page's `next`), at most `limit` (clamped to 1..=`MAX_PAGE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// Scheduled (the default) or running.
    pub state: JobState,
    /// The earliest score listed.
    pub from: Millis,
    /// The latest score listed.
    pub to: Millis,
    /// A previous page's `next`.
    pub cursor: Option<String>,
    /// The most jobs on the page.
    pub limit: usize,
    /// Only jobs carrying this label (a page may then come back short, with a `next`).
    pub label: Option<crate::labels::LabelFilter>,
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery {
            state: JobState::Scheduled,
            from: 0,
            to: crate::time::MAX_MILLIS,
            cursor: None,
            limit: 100,
            label: None,
        }
    }
}

impl Store {
    /// A page of a topic's scheduled or running jobs in score order, merged across its
    /// slots: each slot's first `limit` after the cursor, and the first `limit` of them all,
    /// so a job that did not move is never skipped nor repeated from page to page. While a
    /// doubling drains, a job rewritten during the listing may show in its old slot and its
    /// new one: a page names each job once. A window with `from` after `to` holds no job.
    pub async fn list(&self, topic: &str, q: &ListQuery) -> Result<JobPage> {
        if let Some(label) = &q.label {
            return Box::pin(self.list_labelled(topic, q, label)).await;
        }
        if q.state == JobState::Dead {
            return Err(Error::invalid(
                "state",
                "scheduled or running (dead letters are listed at /dead)",
            ));
        }
        let cursor = q
            .cursor
            .as_deref()
            .map(|s| {
                ListCursor::decode(s)
                    .ok_or_else(|| Error::invalid("cursor", format!("{s:?} is not a cursor")))
            })
            .transpose()?;
        let t = self.existing_topic(topic).await?;
        if q.from > q.to {
            return Ok(JobPage::default());
        }
        let limit = q.limit.clamp(1, MAX_PAGE);
        // A merge that asks each slot for its share first, and asks again only the slots
        // whose next jobs may still fall within the page (plus one, to know if there is
        // more): a page costs about `limit` jobs read, not `limit` per slot.
        let mut lanes: Vec<Lane> = (0..t.slots)
            .map(|slot| Lane {
                slot,
                after: cursor.clone(),
                done: false,
            })
            .collect();
        let mut per = if self.engine.list_reads_whole_slots() {
            limit + 1
        } else {
            (limit / lanes.len() + 1).min(limit + 1)
        };
        let mut found: Vec<(String, Stored)> = Vec::new();
        let mut ask: Vec<usize> = (0..lanes.len()).collect();
        while !ask.is_empty() {
            let t = &t;
            let calls = ask.iter().map(|&i| {
                let (slot, after) = (lanes[i].slot, lanes[i].after.clone());
                async move {
                    let page = self
                        .engine
                        .list(
                            SlotRef::new(t, slot),
                            &Range {
                                state: q.state,
                                from: q.from,
                                to: q.to,
                                after: after.as_ref(),
                                limit: per,
                            },
                        )
                        .await;
                    (i, page)
                }
            });
            for (i, page) in futures_util::future::join_all(calls).await {
                let page = page?;
                lanes[i].done = page.len() < per;
                if let Some((id, s)) = page.last() {
                    lanes[i].after = Some(ListCursor {
                        score: s.score,
                        id: id.clone(),
                    });
                }
                found.extend(page);
            }
            found.sort_by(|(a, x), (b, y)| (x.score, a).cmp(&(y.score, b)));
            let bound = found.get(limit).map(|(id, s)| (s.score, id.as_str()));
            ask = (0..lanes.len())
                .filter(|&i| {
                    let lane = &lanes[i];
                    let last = lane.after.as_ref().map(|c| (c.score, c.id.as_str()));
                    !lane.done && bound.is_none_or(|b| last.is_none_or(|l| l < b))
                })
                .collect();
            per = (per * 2).min(limit + 1);
        }
        page_of(&t, found, limit)
    }

    /// Dead letters oldest first, after the cursor `after` (a previous page's `next`).
    pub async fn dead_list(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<DeadPage> {
        let t = self.existing_topic(topic).await?;
        let limit = limit.clamp(1, MAX_PAGE);
        let cursor = after
            .map(|s| {
                DeadCursor::decode(s)
                    .ok_or_else(|| Error::invalid("after", format!("{s:?} is not a cursor")))
            })
            .transpose()?;
        // Each slot's oldest `limit` after the cursor, then the oldest `limit` of them all.
        let calls = (0..t.slots).map(|slot| {
            self.engine
                .dead_page(SlotRef::new(&t, slot), cursor.as_ref(), limit)
        });
        let mut entries = Vec::new();
        for page in futures_util::future::join_all(calls).await {
            entries.extend(page?);
        }
        dead_page(&t, entries, limit)
    }

    /// Schedules a dead job again, due `now`, attempts starting again; false if none.
    pub(crate) async fn dead_requeue(
        &self,
        t: &TopicConfig,
        job: &JobRef,
        now: Millis,
    ) -> Result<bool> {
        let (slot, old) = Self::places(t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self
                .engine
                .requeue(SlotRef::new(t, slot), &job.id, now)
                .await?
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Drops a dead letter; false if there is no such dead job.
    pub async fn dead_delete(&self, topic: &str, job: &JobRef) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (slot, old) = Self::places(&t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self
                .engine
                .dead_delete(SlotRef::new(&t, slot), &job.id)
                .await?
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Scheduled, running and dead counts per slot and in total, and the next fire time.
    pub async fn stats(&self, topic: &str) -> Result<TopicStats> {
        let t = self.existing_topic(topic).await?;
        let calls = (0..t.slots).map(|slot| self.engine.slot_stats(SlotRef::new(&t, slot)));
        let per_slot = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        Ok(TopicStats::from_slots(&t.name, per_slot))
    }

    /// Appends events that belong to no run's outcome (a re-arm, the application's own) to
    /// the topic's stream, which keeps about `StoreOptions::events_max_len` entries.
    pub(crate) async fn append_events(&self, t: &TopicConfig, events: &[Event]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.engine.append_events(t, events).await
    }

    /// Events after the position `after` (exclusive; from the oldest when `None`).
    pub async fn read_events(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage> {
        let after = after
            .map(|id| {
                EventId::parse(id).ok_or_else(|| {
                    Error::invalid("after", format!("{id:?} is not an event id (ms-seq-slot)"))
                })
            })
            .transpose()?;
        let t = self.existing_topic(topic).await?;
        let items = self
            .engine
            .read_events(&t, after, limit.clamp(1, MAX_PAGE))
            .await?;
        Ok(EventPage::new(items))
    }
}

/// The page of dead letters after a cursor: each slot's oldest `limit` entries merged, and the
/// oldest `limit` of them all kept (both engines page this way).
pub(super) fn dead_page(
    topic: &TopicConfig,
    mut entries: Vec<DeadEntry>,
    limit: usize,
) -> Result<DeadPage> {
    entries.sort_by(|a, b| a.cursor.cmp(&b.cursor));
    let more = entries.len() > limit;
    entries.truncate(limit);
    let next = more
        .then(|| entries.last().map(|e| e.cursor.encode()))
        .flatten();
    let items = entries
        .into_iter()
        .map(|e| {
            let c = e.cursor;
            e.record.into_job(topic, c.id, JobState::Dead, c.dead_at)
        })
        .collect::<Result<_>>()?;
    Ok(DeadPage { items, next })
}

/// A page of `limit` of the jobs `found` (in order, perhaps one more, perhaps an id twice
/// from two asks of a slot), with the cursor of the next page when there is more.
fn page_of(t: &TopicConfig, mut found: Vec<(String, Stored)>, limit: usize) -> Result<JobPage> {
    let mut seen = std::collections::HashSet::new();
    found.retain(|(id, _)| seen.insert(id.clone()));
    let more = found.len() > limit;
    found.truncate(limit);
    let next = more
        .then(|| {
            found.last().map(|(id, s)| ListCursor {
                score: s.score,
                id: id.clone(),
            })
        })
        .flatten()
        .map(|c| c.encode());
    let items = found
        .into_iter()
        .map(|(id, s)| s.record.into_job(t, id, s.state, s.score))
        .collect::<Result<_>>()?;
    Ok(JobPage { items, next })
}
