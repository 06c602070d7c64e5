//! The Lua scripts of `lua/`, one Rust file each beside it (`lua/x.lua`, `scripts/x.rs`):
//! the [`Call`] that builds the script's keys and arguments and reads its reply. Each script
//! runs with the shared helpers of `lua/lib.lua`: as a function of one Redis Functions
//! library, or as an `EVALSHA` script with the helpers in front where Redis has no functions
//! (`library.rs`). The engine runs a call with `RedisEngine::run`, which picks the
//! connection and confirms a write answered to a caller.

mod adopt;
mod append;
mod cancel;
mod dead_delete;
mod dead_page;
mod disown;
mod events_page;
mod flow;
mod get;
mod import;
mod layout;
mod library;
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

use redis::FromRedisValue;

use self::library::Source;
pub(super) use self::library::{Invocation, Library, Lua};

use crate::error::Result;
use crate::topic::TopicConfig;

pub(super) use self::{
    adopt::Adopt,
    append::Append,
    cancel::Cancel,
    dead_delete::DeadDelete,
    dead_page::DeadPage,
    disown::Disown,
    events_page::EventsPage,
    flow::{Flow, FlowOp, FlowRead},
    get::Get,
    import::Import,
    layout::Layout,
    list::List,
    own::Own,
    pump::Pump,
    rate::Rate,
    register::Register,
    requeue::Requeue,
    reset_many::ResetMany,
    schedule::Schedule,
    settle::Settle,
    topic_put::TopicPut,
    touch::Touch,
};

/// One call of one script: its keys and arguments, and how its reply reads.
pub(super) trait Call {
    /// The reply as Redis answers it.
    type Reply: FromRedisValue;
    /// The reply as the engine answers it.
    type Out;

    /// The script, of the engine's ones.
    fn script(scripts: &Scripts) -> &Lua;

    /// Whether the call is a write answered to a caller: it goes over the connection whose
    /// writes are confirmed (`redis.durability`), and is confirmed before it is answered.
    fn answered(&self) -> bool;

    /// The slot the call changes, for a refusal that names it (`FENCED`, `STALE_LAYOUT`).
    fn place(&self) -> Option<(&TopicConfig, u32)> {
        None
    }

    /// Adds the keys and arguments.
    fn build(&self, call: &mut Invocation);

    /// Reads the reply.
    fn read(self, reply: Self::Reply) -> Result<Self::Out>;
}

/// Every script of `lua/` by name, with the flags (Redis 7) it declares: a script without
/// `allow-oom` is refused before it runs while Redis is over its `maxmemory`, so a refused
/// write has changed nothing (Redis does not roll back a script that fails half way).
/// Scripts that only take data away or keep work moving (pumps, settles, leases, cancels)
/// carry `allow-oom`, so a full store can still drain; reads carry `no-writes`.
macro_rules! scripts {
    ($($name:ident $(: $flag:literal)?;)*) => {
        const SOURCES: &[Source] = &[$(Source {
            name: stringify!($name),
            flags: &[$($flag)?],
            body: include_str!(concat!("../../../../lua/", stringify!($name), ".lua")),
        }),*];

        /// The scripts, and the library that holds them all.
        pub(super) struct Scripts {
            $(pub $name: Lua,)*
            pub library: Library,
        }

        impl Scripts {
            pub(super) fn new() -> Self {
                let library = Library::new(SOURCES);
                let mut sources = SOURCES.iter();
                Scripts {
                    $($name: Lua::new(sources.next().expect("one source per script"), &library),)*
                    library,
                }
            }
        }
    };
}

scripts! {
    schedule;
    reset_many;
    pump: "allow-oom";
    settle: "allow-oom";
    events_page: "no-writes";
    touch: "allow-oom";
    cancel: "allow-oom";
    get: "no-writes";
    dead_page: "no-writes";
    requeue;
    dead_delete: "allow-oom";
    topic_put;
    own: "allow-oom";
    disown: "allow-oom";
    register: "allow-oom";
    layout;
    list: "no-writes";
    adopt: "no-writes";
    append;
    // A full store still drains: its pumps must get their fires.
    rate: "allow-oom";
    // Likewise a full store's waiting jobs must get their room.
    flow: "allow-oom";
    import;
}
