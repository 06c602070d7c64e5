//! The Lua scripts of `lua/`, each with the shared helpers of `lua/lib.lua` in front.
//! `redis::Script` calls them by SHA and loads them again after NOSCRIPT (a flushed script
//! cache or a failed-over node).

use redis::Script;

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
            include_str!("../../lua/lib.lua"),
            "\n",
            include_str!(concat!("../../lua/", $file))
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
    pub adopt: Script,
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
            adopt: script!("adopt.lua", " flags=no-writes"),
        }
    }
}
