//! Jobs together, by label and fire-time range (`JobFilter`): listed, cancelled, and (when
//! dead) requeued. A bulk change walks each slot a page at a time and changes each job in
//! its own atomic step, so a job a reset moves meanwhile is changed once at most; a cancel
//! walks again until a walk finds nothing (a job moved behind the walk is found by the next).

use super::Store;
use crate::error::Result;
use crate::labels::LabelFilter;
use crate::model::{JobPage, JobState, ListCursor};
use crate::store::engine::Range;
use crate::store::engine::SlotRef;
use crate::store::record::Record;
use crate::time::Millis;
use crate::topic::TopicConfig;

/// How many jobs one page of a bulk walk reads from a slot.
const WALK_PAGE: usize = 1_000;
/// How many walks a bulk cancel makes at most: it stops at the first that finds nothing.
const MAX_WALKS: usize = 5;
/// How many jobs a filtered listing reads at most for one page: a page of a rare label may
/// come back short (even empty) with a `next` to go on from.
const LIST_READ_MAX: usize = 10 * super::MAX_PAGE;

/// Which jobs a bulk operation takes: those with `label` (any when `None`) whose fire time is
/// within `from..=to`.
#[derive(Debug, Clone)]
pub struct JobFilter {
    /// Jobs carrying this label; any when `None`.
    pub label: Option<LabelFilter>,
    /// The earliest fire time taken.
    pub from: Millis,
    /// The latest fire time taken.
    pub to: Millis,
    /// At most this many jobs change; all when `None`.
    pub limit: Option<u64>,
}

impl JobFilter {
    fn takes(&self, record: &Record, fire_at: Millis) -> bool {
        (self.from..=self.to).contains(&fire_at)
            && self
                .label
                .as_ref()
                .is_none_or(|l| l.matches(&record.labels))
    }
}

impl Store {
    /// A page of a topic's scheduled or running jobs carrying `label`, from the listing's
    /// order (see [`Store::list`]).
    pub(super) async fn list_labelled(
        &self,
        topic: &str,
        q: &super::ListQuery,
        label: &LabelFilter,
    ) -> Result<JobPage> {
        let limit = q.limit.clamp(1, super::MAX_PAGE);
        let mut items = Vec::new();
        let mut cursor = q.cursor.clone();
        let mut read = 0;
        loop {
            let page = self
                .list(
                    topic,
                    &super::ListQuery {
                        cursor: cursor.clone(),
                        limit: super::MAX_PAGE,
                        label: None,
                        ..q.clone()
                    },
                )
                .await?;
            read += page.items.len();
            for job in page.items {
                let score = match q.state {
                    JobState::Running => job.lease_until.unwrap_or(job.fire_at),
                    _ => job.fire_at,
                };
                let here = ListCursor {
                    score,
                    id: job.id.clone(),
                };
                if label.matches(&job.labels) {
                    items.push(job);
                    if items.len() == limit {
                        return Ok(JobPage {
                            items,
                            next: Some(here.encode()),
                        });
                    }
                }
                cursor = Some(here.encode());
            }
            if page.next.is_none() {
                return Ok(JobPage { items, next: None });
            }
            if read >= LIST_READ_MAX {
                return Ok(JobPage {
                    items,
                    next: cursor,
                });
            }
        }
    }

    /// Cancels a topic's scheduled jobs that `filter` takes (at most its `limit`); how many
    /// it cancelled. Running jobs finish their run; dead letters stay.
    pub async fn cancel_where(&self, topic: &str, filter: &JobFilter) -> Result<u64> {
        let t = self.existing_topic(topic).await?;
        let mut cancelled = 0;
        for _ in 0..MAX_WALKS {
            let mut this_walk = 0;
            for slot in 0..t.slots {
                let mut after = None;
                loop {
                    let page = self
                        .engine
                        .list(
                            SlotRef::new(&t, slot),
                            &Range {
                                state: JobState::Scheduled,
                                from: filter.from,
                                to: filter.to,
                                after: after.as_ref(),
                                limit: WALK_PAGE,
                            },
                        )
                        .await?;
                    for (id, s) in &page {
                        if filter.takes(&s.record, s.score)
                            && self
                                .engine
                                .cancel(SlotRef::new(&t, slot), id)
                                .await?
                                .is_some()
                        {
                            this_walk += 1;
                            if filter.limit == Some(cancelled + this_walk) {
                                return Ok(cancelled + this_walk);
                            }
                        }
                    }
                    if page.len() < WALK_PAGE {
                        break;
                    }
                    after = page.last().map(|(id, s)| ListCursor {
                        score: s.score,
                        id: id.clone(),
                    });
                }
            }
            cancelled += this_walk;
            if this_walk == 0 {
                break;
            }
        }
        Ok(cancelled)
    }

    /// Schedules again, due `now`, the topic's dead letters that `filter` takes (by the fire
    /// time of their last run; at most its `limit`); how many, and the slots they are in.
    pub(crate) async fn requeue_where(
        &self,
        t: &TopicConfig,
        filter: &JobFilter,
        now: Millis,
    ) -> Result<(u64, Vec<u32>)> {
        self.each_dead_where(t, filter, |slot, id| async move {
            self.engine.requeue(SlotRef::new(t, slot), &id, now).await
        })
        .await
    }

    /// Deletes the topic's dead letters `filter` takes, each once (at most `filter.limit`):
    /// how many, and the slots they were in.
    pub(crate) async fn delete_dead_where(
        &self,
        t: &TopicConfig,
        filter: &JobFilter,
    ) -> Result<(u64, Vec<u32>)> {
        self.each_dead_where(t, filter, |slot, id| async move {
            self.engine.dead_delete(SlotRef::new(t, slot), &id).await
        })
        .await
    }

    /// Walks the topic's dead letters slot by slot, page by page, and applies `change` to
    /// each `filter` takes (by its labels and its last run's fire time), up to
    /// `filter.limit` changed: how many it changed, and the slots they were in.
    async fn each_dead_where<F, Fut>(
        &self,
        t: &TopicConfig,
        filter: &JobFilter,
        change: F,
    ) -> Result<(u64, Vec<u32>)>
    where
        F: Fn(u32, String) -> Fut,
        Fut: std::future::Future<Output = Result<bool>>,
    {
        let (mut changed, mut slots) = (0, Vec::new());
        'slots: for slot in 0..t.slots {
            let mut after = None;
            let before = changed;
            loop {
                let page = self
                    .engine
                    .dead_page(SlotRef::new(t, slot), after.as_ref(), WALK_PAGE)
                    .await?;
                for entry in &page {
                    let fire_at = entry.record.run_fire_at.unwrap_or(entry.cursor.dead_at);
                    if filter.takes(&entry.record, fire_at)
                        && change(slot, entry.cursor.id.clone()).await?
                    {
                        changed += 1;
                        if filter.limit == Some(changed) {
                            slots.push(slot);
                            break 'slots;
                        }
                    }
                }
                if page.len() < WALK_PAGE {
                    break;
                }
                after = page.last().map(|e| e.cursor.clone());
            }
            if changed > before {
                slots.push(slot);
            }
        }
        Ok((changed, slots))
    }
}
