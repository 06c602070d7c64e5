//! `lua/pump.lua`: takes back expired leases, then leases out a slot's due jobs
//! (`SlotJobs::pump`).

use redis::Value;

use super::super::reply::{Reply, text};
use super::{Call, Invocation, Lua, Scripts};
use crate::error::{Error, Result};
use crate::model::HandedRecord;
use crate::store::engine::{Handed, PumpArgs, SlotPumped};
use crate::store::keys::SlotKeys;
use crate::store::record::Record;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Pump<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) args: &'a PumpArgs<'a>,
    /// `args.aside` as the script's argument, when a key is set aside.
    pub(in crate::store::redis) aside: Option<String>,
}

/// A run a script handed out, from its id and its record's text as the script wrote it
/// (which names the run's token); `script` names the script in an error.
pub(in crate::store::redis) fn handed(script: &str, id: &Value, raw: &Value) -> Result<Handed> {
    let raw = text(raw)?;
    let record = Record::parse(&raw)?;
    let token = record.token.ok_or_else(|| {
        Error::Corrupt(format!(
            "{script}.lua handed out a run with no token: {raw}"
        ))
    })?;
    Ok(Handed {
        id: text(id)?,
        token,
        record,
        text: HandedRecord::new(token, raw.into()),
    })
}

impl Call for Pump<'_> {
    type Reply = Vec<Value>;
    type Out = SlotPumped;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.pump
    }

    fn answered(&self) -> bool {
        false
    }

    fn place(&self) -> Option<(&TopicConfig, u32)> {
        Some((self.topic, self.slot))
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.args.now)
            .arg(self.args.limit)
            .arg(self.args.lease_ms)
            .arg(self.topic.max_attempts)
            .arg(self.args.fence)
            .arg(self.args.lead);
        if let Some(aside) = &self.aside {
            call.arg(aside.as_str());
        }
    }

    fn read(self, reply: Vec<Value>) -> Result<SlotPumped> {
        let reply = Reply::new("pump", &reply);
        let next_at = reply.int(0)?;
        // With a key set aside, its counts come third: `{key, count, ...}`.
        let (set_aside, from) = match self.aside {
            None => (Vec::new(), 2),
            Some(_) => {
                let Value::Array(counts) = reply.get(2)? else {
                    return Err(reply.corrupt("its third value is not the keys set aside"));
                };
                let counts = counts
                    .chunks_exact(2)
                    .map(|kv| {
                        Ok((
                            text(&kv[0])?,
                            crate::num::count_u32(super::super::reply::int(&kv[1])?),
                        ))
                    })
                    .collect::<Result<Vec<_>>>()?;
                (counts, 3)
            }
        };
        let handed = reply
            .records(from, 2)?
            .map(|entry| handed("pump", &entry[0], &entry[1]))
            .collect::<Result<_>>()?;
        Ok(SlotPumped {
            handed,
            expired: crate::num::count_u32(reply.int(1)?),
            next_at: (next_at >= 0).then_some(next_at),
            set_aside,
        })
    }
}
