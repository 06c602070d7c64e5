//! The Lua scripts of `lua/`, each with the shared helpers of `lua/lib.lua` in front.
//! `redis::Script` calls them by SHA and loads them again after NOSCRIPT (a flushed script
//! cache or a failed-over node).

use redis::Script;

macro_rules! script {
    ($file:literal) => {
        Script::new(concat!(
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
            pump: script!("pump.lua"),
            settle: script!("settle.lua"),
            events_page: script!("events_page.lua"),
            touch: script!("touch.lua"),
            cancel: script!("cancel.lua"),
            get: script!("get.lua"),
            dead_page: script!("dead_page.lua"),
            requeue: script!("requeue.lua"),
            dead_delete: script!("dead_delete.lua"),
            topic_put: script!("topic_put.lua"),
            own: script!("own.lua"),
            disown: script!("disown.lua"),
            register: script!("register.lua"),
            layout: script!("layout.lua"),
            adopt: script!("adopt.lua"),
        }
    }
}
