//! The Lua scripts of `lua/`, one Rust file each beside it (`lua/x.lua`, `scripts/x.rs`):
//! the [`Call`] that builds the script's keys and arguments and reads its reply. Each script
//! runs with the shared helpers of `lua/lib.lua` in front; `redis::Script` calls it by SHA
//! and loads it again after NOSCRIPT (a flushed script cache or a failed-over node). The
//! engine runs a call with `RedisEngine::run`, which picks the connection and confirms a
//! write answered to a caller.

mod adopt;
mod cancel;
mod dead_delete;
mod dead_page;
mod disown;
mod events_page;
mod get;
mod layout;
mod list;
mod own;
mod pump;
mod rate;
mod register;
mod requeue;
mod reset_many;
mod schedule;
pub(super) mod settle;
mod topic_put;
mod touch;

use redis::{FromRedisValue, Script, ScriptInvocation};

use crate::error::Result;
use crate::topic::TopicConfig;

pub(super) use self::{
    adopt::Adopt, cancel::Cancel, dead_delete::DeadDelete, dead_page::DeadPage, disown::Disown,
    events_page::EventsPage, get::Get, layout::Layout, list::List, own::Own, pump::Pump,
    rate::Rate, register::Register, requeue::Requeue, reset_many::ResetMany, schedule::Schedule,
    settle::Settle, topic_put::TopicPut, touch::Touch,
};

/// One call of one script: its keys and arguments, and how its reply reads.
pub(super) trait Call {
    /// The reply as Redis answers it.
    type Reply: FromRedisValue;
    /// The reply as the engine answers it.
    type Out;

    /// The script, of the engine's loaded ones.
    fn script(scripts: &Scripts) -> &Script;

    /// Whether the call is a write answered to a caller: it goes over the connection whose
    /// writes are confirmed (`redis.durability`), and is confirmed before it is answered.
    fn answered(&self) -> bool;

    /// The slot the call changes, for a refusal that names it (`FENCED`, `STALE_LAYOUT`).
    fn place(&self) -> Option<(&TopicConfig, u32)> {
        None
    }

    /// Adds the keys and arguments.
    fn build(&self, call: &mut ScriptInvocation<'_>);

    /// Reads the reply.
    fn read(self, reply: Self::Reply) -> Result<Self::Out>;
}

/// A script of `lua/` with the helpers in front, under a shebang that declares its flags
/// (Redis 7): a script without `allow-oom` is refused before it runs while Redis is over its
/// `maxmemory`, so a refused write has changed nothing (Redis does not roll back a script
/// that fails half way). Scripts that only take data away or keep work moving (pumps,
/// settles, leases, cancels) carry `allow-oom`, so a full store can still drain; reads carry
/// `no-writes`.
macro_rules! script {
    ($file:literal) => {
        script!($file, "")
    };
    ($file:literal, $flags:literal) => {
        Script::new(concat!(
            "#!lua",
            $flags,
            "\n",
            include_str!("../../../../lua/lib.lua"),
            "\n",
            include_str!(concat!("../../../../lua/", $file))
        ))
    };
}

pub(super) struct Scripts {
    pub schedule: Script,
    pub reset_many: Script,
    pub pump: Script,
    pub settle: Script,
    pub events_page: Script,
    pub touch: Script,
    pub cancel: Script,
    pub get: Script,
    pub dead_page: Script,
    pub requeue: Script,
    pub dead_delete: Script,
    pub topic_put: Script,
    pub own: Script,
    pub disown: Script,
    pub register: Script,
    pub layout: Script,
    pub list: Script,
    pub adopt: Script,
    pub rate: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Scripts {
            schedule: script!("schedule.lua"),
            reset_many: script!("reset_many.lua"),
            pump: script!("pump.lua", " flags=allow-oom"),
            settle: script!("settle.lua", " flags=allow-oom"),
            events_page: script!("events_page.lua", " flags=no-writes"),
            touch: script!("touch.lua", " flags=allow-oom"),
            cancel: script!("cancel.lua", " flags=allow-oom"),
            get: script!("get.lua", " flags=no-writes"),
            dead_page: script!("dead_page.lua", " flags=no-writes"),
            requeue: script!("requeue.lua"),
            dead_delete: script!("dead_delete.lua", " flags=allow-oom"),
            topic_put: script!("topic_put.lua"),
            own: script!("own.lua", " flags=allow-oom"),
            disown: script!("disown.lua", " flags=allow-oom"),
            register: script!("register.lua", " flags=allow-oom"),
            layout: script!("layout.lua"),
            list: script!("list.lua", " flags=no-writes"),
            adopt: script!("adopt.lua", " flags=no-writes"),
            // A full store still drains: its pumps must get their fires.
            rate: script!("rate.lua", " flags=allow-oom"),
        }
    }
}
