//! Every Redis key name, built here and nowhere else.
//!
//! All keys of one (topic, slot) share the hash tag `{topic:slot}`, so each script touches a
//! single Redis Cluster hash slot, and a topic's slots spread over the cluster's nodes.

/// The run set's padding member: this many dots at score `+inf`, longer than any id may be
/// (`MAX_ID_LEN`), so no lookup by id meets it, and more than `zset-max-listpack-value`, so
/// the run set stays a skiplist. Written by `pump.lua`; readers of the whole run set skip it.
pub(crate) const RUN_PAD_LEN: usize = 600;
/// The job hash's padding field (the empty id) holds this many dots, over
/// `hash-max-listpack-value`, so the hash stays a hash table. Written by `pump.lua`.
pub(crate) const JOB_PAD_LEN: usize = 128;

/// The due set names a scheduled job that has a record by its id and this byte, a plain one
/// by its id alone (`lua/lib.lua`'s `MARK`), so that a `ZADD XX` of bare ids moves plain jobs
/// only. No id holds it (`validate::job_id`), and it sorts below every byte an id may hold,
/// so members sort as their ids do.
pub(crate) const DUE_MARK: char = '\0';
const _: () = assert!(RUN_PAD_LEN > crate::validate::MAX_ID_LEN);
// Redis' defaults for zset-max-listpack-value and hash-max-listpack-value are 64.
const _: () = assert!(RUN_PAD_LEN > 64 && JOB_PAD_LEN > 64);

/// The eight keys of one slot, in the order every script takes them as KEYS[1..8].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SlotKeys {
    /// Sorted set of scheduled jobs: member id, score fire time.
    pub due: String,
    /// Sorted set of running jobs: member id, score lease deadline.
    pub run: String,
    /// Sorted set of dead jobs: member id, score time of death.
    pub dead: String,
    /// Hash of job records (see `record.rs`): field id, value compact JSON.
    pub job: String,
    /// Counter that issues run tokens.
    pub seq: String,
    /// The slot's share of the topic's event stream (a capped Redis Stream). It lives in the
    /// slot's hash tag so that `settle.lua` appends a run's events in the same atomic step as
    /// its outcome, on a Redis Cluster too; a read of the topic's events merges the slots'.
    pub events: String,
    /// Hash of the slot's owner lease: holder `id`, `until` (ms) and `fence`, the number
    /// every pump of the owner carries and that only grows (see `own.lua`).
    pub owner: String,
    /// List of the event stream's entries, oldest first, each as `count id` (its events and
    /// its stream id): what trimming the stream to its cap in events reads (`lib.lua`).
    pub sizes: String,
    list: [String; 8],
}

impl SlotKeys {
    pub(super) fn new(topic: &str, slot: u32) -> Self {
        let tag = format!("toc:{{{topic}:{slot}}}");
        let list = [
            "due", "run", "dead", "job", "seq", "events", "owner", "sizes",
        ]
        .map(|k| format!("{tag}:{k}"));
        let [due, run, dead, job, seq, events, owner, sizes] = list.clone();
        SlotKeys {
            list,
            due,
            run,
            dead,
            job,
            seq,
            events,
            owner,
            sizes,
        }
    }

    pub(super) fn all(&self) -> &[String] {
        &self.list
    }
}

/// Hash of the instances sharing the store: field instance, value when its registration
/// runs out (ms).
pub(super) const INSTANCES: &str = "toc:instances";
/// The job types each live instance runs (hash: instance -> types, comma-separated), kept
/// beside `INSTANCES` by `register.lua`; its hash tag puts it in `INSTANCES`'s Cluster slot.
pub(super) const INSTANCE_TYPES: &str = "{toc:instances}:types";

/// Hash of a topic's fire bucket (`rate.lua`): `m` thousandths of a fire held, `at` its last
/// refill (ms). In the topic's own hash tag, on one node of a Cluster.
pub(super) fn rate_key(topic: &str) -> String {
    format!("toc:{{{topic}}}:rate")
}

/// The three keys of a flow key's counters (`flow.lua`): its holders, its period's fires and
/// its waiters, in the hash tag of the key's slot (the slot a job routed by the key would
/// have), so a Cluster keeps one key's counters on one node and spreads keys over the nodes.
pub(super) fn flow_keys(topic: &str, slots: u32, key: &str) -> [String; 3] {
    let slot = crate::routing::slot_of(key, slots);
    ["h", "l", "w"].map(|k| format!("toc:{{{topic}:{slot}}}:flow:{key}:{k}"))
}

/// Hash of topic settings: field topic name, value JSON (without its keys' own flow
/// limits, which live apart in [`flows_key`]).
pub(super) const TOPICS: &str = "toc:topics";

/// Hash of a topic's flow keys with limits of their own: field key, value limits JSON. A
/// change writes one field, however many keys the topic has.
pub(super) fn flows_key(topic: &str) -> String {
    format!("toc:{{{topic}}}:flows")
}

/// Hash of each topic's flow-limits revision: field topic name, a counter raised after each
/// change of [`flows_key`], so a listing of every topic reads again only the keys of topics
/// whose limits changed (the topic's notice tells the instances at once; this is for a
/// notice lost).
pub(super) const FLOW_REVS: &str = "toc:flow-revs";

/// The sharded pub/sub channel of one slot on a Redis Cluster (`SPUBLISH`/`SSUBSCRIBE`): in
/// the slot's hash tag, so it lives on the node holding the slot's keys, and only the
/// slot's owner, subscribed to it, hears its notices. The message is `slot:at`.
pub(super) fn slot_wake_channel(topic: &str, slot: u32) -> String {
    format!("toc:{{{topic}:{slot}}}:wake")
}

/// The topic and slot of a [`slot_wake_channel`].
pub(super) fn parse_slot_wake_channel(channel: &str) -> Option<(&str, u32)> {
    let tag = channel.strip_prefix("toc:{")?.strip_suffix("}:wake")?;
    let (topic, slot) = tag.rsplit_once(':')?;
    Some((topic, slot.parse().ok()?))
}

/// The pub/sub channel on which a topic's slots are told to wake: the message is the slot.
pub(super) fn wake_channel(topic: &str) -> String {
    format!("toc:wake:{topic}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_wake_channel_names_its_topic_and_slot() {
        let c = slot_wake_channel("a:b", 12);
        assert_eq!(c, "toc:{a:b:12}:wake");
        assert_eq!(parse_slot_wake_channel(&c), Some(("a:b", 12)));
        assert_eq!(parse_slot_wake_channel("toc:wake:x"), None);
    }

    #[test]
    fn slot_keys_share_one_hash_tag() {
        let k = SlotKeys::new("orders", 5);
        for key in k.all() {
            assert!(key.starts_with("toc:{orders:5}:"), "{key}");
        }
    }
}

#[cfg(test)]
mod padding {
    use super::{JOB_PAD_LEN, RUN_PAD_LEN};

    /// The length of what `lib.lua`'s `pads` sets `NAME` to, a concatenation of quoted dots
    /// and `DOTS` (itself `dots` long).
    fn length(name: &str, dots: usize) -> usize {
        let lua = include_str!("../../lua/lib.lua");
        let line = lua
            .lines()
            .map(str::trim_start)
            .find(|l| {
                l.starts_with(&format!("{name} = ")) || l.starts_with(&format!("local {name} = "))
            })
            .unwrap_or_else(|| panic!("lib.lua sets {name}"));
        let (_, value) = line.split_once(" = ").expect("an assignment");
        value
            .split(" .. ")
            .map(|part| match part {
                "DOTS" => dots,
                quoted => quoted.trim_matches('\'').len(),
            })
            .sum()
    }

    #[test]
    fn lib_lua_marks_due_members_with_the_constants_byte() {
        let lua = include_str!("../../lua/lib.lua");
        assert!(lua.contains("local MARK = '\\0'"));
        assert_eq!(super::DUE_MARK, '\0');
        assert!(lua.contains(&format!(
            "string.byte(member, -1) == {}",
            super::DUE_MARK as u8
        )));
    }

    #[test]
    fn lib_lua_builds_the_padding_the_constants_name() {
        let dots = length("DOTS", 0);
        assert_eq!(
            length("TABLE_PAD", dots),
            JOB_PAD_LEN,
            "lib.lua's TABLE_PAD"
        );
        assert_eq!(length("RUN_PAD", dots), RUN_PAD_LEN, "lib.lua's RUN_PAD");
    }
}
