//! How a script of `lua/` reaches Redis: as a function of one Redis Functions library
//! (`FUNCTION LOAD` once, `FCALL` each call), or, on a Redis that has no functions (before
//! 7.0, or with `FCALL` renamed away), as an `EVALSHA` script.
//!
//! The library holds `lua/lib.lua`'s helpers once and every script as a function whose body
//! is the script's text: the helpers are built when the library loads, not on every call
//! as an `EVAL` script's prelude is. Redis persists and replicates a library (a promoted
//! replica has it); a node that lacks it (a new Cluster primary, a `FUNCTION FLUSH`, a
//! replica promoted before the load reached it) answers "Function not found", and the
//! call loads the library (on every primary of a Cluster: the client routes
//! `FUNCTION LOAD` to all of them) and runs again. The library's name carries a checksum of
//! its code, so instances of two versions side by side during an upgrade each call their
//! own functions.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use redis::aio::ConnectionLike;

use crate::store::redis::durable::{Sent, Wait};
use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, Script, ServerErrorKind, ToRedisArgs};

/// The helpers every script runs with (`lua/lib.lua`).
const LIB: &str = include_str!("../../../../lua/lib.lua");

/// One script of `lua/`: its name (`lua/NAME.lua`), its flags (Redis 7: `allow-oom`,
/// `no-writes`) and its text.
pub(super) struct Source {
    pub(super) name: &'static str,
    pub(super) flags: &'static [&'static str],
    pub(super) body: &'static str,
}

/// One script as both forms call it.
pub(in crate::store::redis) struct Lua {
    /// The `EVAL` form: a shebang with the flags, the helpers, then the script.
    script: Script,
    /// The function's name in the library.
    function: String,
}

impl Lua {
    pub(super) fn new(source: &Source, library: &Library) -> Self {
        let flags = if source.flags.is_empty() {
            String::new()
        } else {
            format!(" flags={}", source.flags.join(","))
        };
        Lua {
            script: Script::new(&format!("#!lua{flags}\n{LIB}\nbind(KEYS)\n{}", source.body)),
            function: format!("{}_{}", library.name, source.name),
        }
    }
}

/// The function library of every script, and whether this Redis runs functions.
pub(in crate::store::redis) struct Library {
    /// `toc_` and a checksum of the code.
    name: String,
    /// What `FUNCTION LOAD` takes.
    code: String,
    /// False once Redis answered that it has no `FCALL`: every call is then an `EVALSHA`.
    functions: AtomicBool,
    /// Loads done, so calls that all met a missing library load it once.
    loads: AtomicU64,
    loading: tokio::sync::Mutex<()>,
}

/// `cmd` alone, or in one pipeline with its `WAIT`.
async fn send<C: ConnectionLike, T: FromRedisValue>(
    conn: &mut C,
    cmd: &redis::Cmd,
    wait: Option<&Wait>,
) -> RedisResult<(T, Option<Sent>)> {
    match wait {
        None => cmd.query_async(conn).await.map(|t| (t, None)),
        Some(w) => w.send(conn, cmd).await.map(|(t, sent)| (t, Some(sent))),
    }
}

impl Library {
    pub(super) fn new(sources: &[Source]) -> Self {
        let mut functions = String::new();
        for source in sources {
            let flags: Vec<String> = source.flags.iter().map(|f| format!("'{f}'")).collect();
            // `@` stands for the library's name until the checksum is known.
            let _ = write!(
                functions,
                "redis.register_function{{function_name='@_{}', flags={{{}}}, \
                 callback=function(KEYS, ARGV)\nbind(KEYS)\n{}\nend}}\n",
                source.name,
                flags.join(", "),
                source.body
            );
        }
        let checksum = crc32fast::hash(format!("{LIB}\n{functions}").as_bytes());
        let name = format!("toc_{checksum:08x}");
        let functions = functions.replace("function_name='@_", &format!("function_name='{name}_"));
        Library {
            code: format!("#!lua name={name}\n{LIB}\n{functions}"),
            name,
            functions: AtomicBool::new(true),
            loads: AtomicU64::new(0),
            loading: tokio::sync::Mutex::new(()),
        }
    }

    /// Runs `lua` with `call`'s keys and arguments over `conn`: `FCALL` (loading the library
    /// where it is missing), or `EVALSHA` where Redis has no functions (loading the script
    /// after NOSCRIPT).
    ///
    /// With `wait`, the call goes in one pipeline with its `WAIT` or `CLIENT ID`
    /// (`durable.rs`), which comes back beside the reply.
    pub(in crate::store::redis) async fn invoke<C, T>(
        &self,
        conn: &mut C,
        lua: &Lua,
        call: &Invocation,
        wait: Option<&Wait>,
    ) -> RedisResult<(T, Option<Sent>)>
    where
        C: ConnectionLike,
        T: FromRedisValue,
    {
        if self.functions.load(Ordering::Relaxed) {
            let fcall = call.command("FCALL", &lua.function);
            match send(conn, &fcall, wait).await {
                Err(e) if missing_function(&e) => {
                    let seen = self.loads.load(Ordering::SeqCst);
                    match self.load(conn, seen).await {
                        Ok(()) => return send(conn, &fcall, wait).await,
                        // A library that cannot load now (a full store refuses
                        // FUNCTION LOAD) leaves this call to EVALSHA.
                        Err(e) => tracing::warn!(
                            library = %self.name, error = %e,
                            "could not load the Redis function library; this call runs as a script"
                        ),
                    }
                }
                Err(e) if unknown_command(&e) => {
                    if self.functions.swap(false, Ordering::Relaxed) {
                        tracing::warn!(
                            error = %e,
                            "Redis has no FCALL (before 7.0, or renamed): the scripts run with EVALSHA"
                        );
                    }
                }
                reply => return reply,
            }
        }
        let eval = call.command("EVALSHA", lua.script.get_hash());
        match send(conn, &eval, wait).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                lua.script.load_async(conn).await?;
                send(conn, &eval, wait).await
            }
            reply => reply,
        }
    }

    /// Loads the library, unless a load finished since `seen` (calls that met the missing
    /// library together load it once).
    async fn load<C: ConnectionLike>(&self, conn: &mut C, seen: u64) -> RedisResult<()> {
        let _one = self.loading.lock().await;
        if self.loads.load(Ordering::SeqCst) != seen {
            return Ok(());
        }
        let _: redis::Value = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(&self.code)
            .query_async(conn)
            .await?;
        self.loads.fetch_add(1, Ordering::SeqCst);
        tracing::info!(library = %self.name, "loaded the Redis function library");
        Ok(())
    }

    /// The library's name (`toc_` and its checksum).
    #[cfg(test)]
    pub(in crate::store::redis) fn name(&self) -> &str {
        &self.name
    }
}

/// "Function not found": this node lacks the library.
fn missing_function(e: &redis::RedisError) -> bool {
    e.detail()
        .is_some_and(|d| d.starts_with("Function not found"))
}

/// "unknown command": this Redis has no `FCALL`.
fn unknown_command(e: &redis::RedisError) -> bool {
    e.detail().is_some_and(|d| d.starts_with("unknown command"))
}

/// A call's keys and arguments, for `FCALL` or `EVALSHA`.
#[derive(Default)]
pub(in crate::store::redis) struct Invocation {
    /// Each a `Cmd` only as a buffer of arguments: one growing allocation for all of them,
    /// where a `Vec` per argument cost a burst's settle an allocation for each of a run's
    /// nine.
    keys: Cmd,
    args: Cmd,
}

impl Invocation {
    /// Adds keys (`KEYS` in the script).
    pub(in crate::store::redis) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Adds arguments (`ARGV` in the script).
    pub(in crate::store::redis) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// `VERB name numkeys keys... args...`.
    fn command(&self, verb: &str, name: &str) -> Cmd {
        let mut cmd = redis::cmd(verb);
        cmd.arg(name).arg(self.keys.args_iter().len());
        // Only `key` and `arg` write these buffers, which never write a cursor argument.
        for part in self.keys.args_iter().chain(self.args.args_iter()) {
            if let redis::Arg::Simple(bytes) = part {
                cmd.arg(bytes);
            }
        }
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::super::Scripts;
    use super::Invocation;

    #[test]
    fn an_invocation_sends_its_keys_then_its_arguments_each_as_one() {
        let mut call = Invocation::default();
        call.key(&["toc:{t:0}:due", "toc:{t:0}:run"][..])
            .arg(42)
            .arg("")
            .arg(&b"a \r\n binary\0 arg"[..])
            .arg("\u{e9}t\u{e9}");
        let want = redis::cmd("FCALL")
            .arg("f")
            .arg(2)
            .arg("toc:{t:0}:due")
            .arg("toc:{t:0}:run")
            .arg("42")
            .arg("")
            .arg(&b"a \r\n binary\0 arg"[..])
            .arg("\u{e9}t\u{e9}")
            .get_packed_command();
        assert_eq!(call.command("FCALL", "f").get_packed_command(), want);
    }

    #[test]
    fn every_function_is_named_after_the_library_whose_name_is_a_checksum_of_its_code() {
        let scripts = Scripts::new();
        let name = scripts.library.name();
        let hex = name.strip_prefix("toc_").expect("toc_ and the checksum");
        assert_eq!(hex.len(), 8);
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
        assert_eq!(scripts.pump.function, format!("{name}_pump"));
        assert!(
            scripts
                .library
                .code
                .starts_with(&format!("#!lua name={name}\n"))
        );
        assert!(scripts.library.code.contains(&format!(
            "function_name='{name}_settle', flags={{'allow-oom'}}"
        )));
        assert!(
            !scripts.library.code.contains("'@_"),
            "every placeholder replaced"
        );
    }
}
