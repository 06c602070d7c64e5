//! Job types as strategies: a [`JobHandler`] says how a job of its type is handled, with its
//! payload typed by serde. Registering a type is one line ([`Handlers::register`]); the pump
//! never changes for a new type.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::Result;
use crate::metrics::Metrics;
use crate::model::{Emitted, Job, JobRef, JobState, Rearmed};
use crate::store::SharedStore;
use crate::time::Millis;
use crate::topic::TopicConfig;

pub use crate::model::Outcome;

/// Events a handler emits, appended to the topic's stream after its run.
#[derive(Clone, Default)]
pub struct Emitter {
    events: Arc<Mutex<Vec<Emitted>>>,
}

impl Emitter {
    pub fn emit(&self, event: impl Into<String>, data: Value) {
        self.events
            .lock()
            .expect("emitter lock")
            .push(Emitted::new(event, data));
    }

    pub fn take(&self) -> Vec<Emitted> {
        std::mem::take(&mut *self.events.lock().expect("emitter lock"))
    }
}

/// What a handler is given: the job, its typed payload, and where to report events.
pub struct JobContext<P> {
    /// The job's topic.
    pub topic: String,
    /// The topic's settings when the job was handed out (its backoff bounds a retry delay a
    /// handler asks for).
    pub settings: Arc<TopicConfig>,
    /// The job, as it was handed out.
    pub job: Job,
    /// The job's payload, decoded.
    pub payload: P,
    /// When the job was handed out.
    pub fired_at: Millis,
    /// Where the handler's events go; they are stored with the run's outcome.
    pub events: Emitter,
    /// Other jobs, for types that manage them (a meeting's approval expiry cancels the rest
    /// of its booking).
    pub jobs: OtherJobs,
    /// The fire's span (`process`) when the job is traced (`Span::none()` when not): a
    /// handler's own spans and calls out (a webhook's `traceparent`) continue its trace.
    pub span: tracing::Span,
}

/// Other jobs of the store, as a handler may touch them: read, and cancelled the way the
/// center cancels (counted in `jobs_cancelled_total`).
#[derive(Clone)]
pub struct OtherJobs {
    store: SharedStore,
    metrics: Arc<Metrics>,
}

impl OtherJobs {
    pub(crate) fn new(store: SharedStore, metrics: Arc<Metrics>) -> Self {
        OtherJobs { store, metrics }
    }

    /// A job, or `None`.
    pub async fn get(&self, topic: &str, job: &JobRef) -> Result<Option<Job>> {
        self.store.get(topic, job).await
    }

    /// Removes a job in any state; the state it was in, or `None`.
    pub async fn cancel(&self, topic: &str, job: &JobRef) -> Result<Option<JobState>> {
        let state = self.store.cancel(topic, job).await?;
        self.metrics.count_cancelled(topic, state);
        Ok(state)
    }
}

impl<P> JobContext<P> {
    /// Emits an event, stored with the run's outcome.
    pub fn emit(&self, event: impl Into<String>, data: Value) {
        self.events.emit(event, data);
    }
}

/// One job type. Implement it, then register it: `handlers.register(MyType)`.
#[async_trait]
pub trait JobHandler: Send + Sync + 'static {
    /// The payload, deserialised from the job's JSON. A payload that does not match sends the
    /// job to the dead letters with the serde error.
    type Payload: DeserializeOwned + Send + 'static;

    /// The type name jobs carry in their `type` field.
    fn job_type(&self) -> &'static str;

    /// Most runs of this type at once.
    fn concurrency(&self) -> usize {
        64
    }

    /// Most runs of this type at once for one topic, so that one topic's slow runs hold
    /// only that share of [`JobHandler::concurrency`]. `None`: no share of its own.
    fn share_per_topic(&self) -> Option<usize> {
        None
    }

    /// Most runs of this type at once for one flow key of a topic (the job's `flow_key`, or
    /// the type's [`JobHandler::flow_key`]). `None`: no share of its own.
    fn share_per_key(&self) -> Option<usize> {
        None
    }

    /// Most runs of this type at once for the topics of one tenant (`TopicConfig::tenant`),
    /// however many topics it made, so that one team's slow runs hold only that share of
    /// [`JobHandler::concurrency`]. A topic of no tenant takes none. `None`: no share.
    fn share_per_tenant(&self) -> Option<usize> {
        None
    }

    /// A run longer than this counts as a failed attempt.
    fn timeout(&self) -> Duration {
        Duration::from_secs(30)
    }

    /// Runs one job and says how it went.
    async fn handle(&self, ctx: JobContext<Self::Payload>) -> Outcome;

    /// A reset reached a job of this type that had fired and repeated since its last reset
    /// (a device heard again after its alarm). Returns an event to append, if any.
    fn on_rearm(&self, _rearmed: &Rearmed) -> Option<Emitted> {
        None
    }

    /// The JSON Schema of this type's payload, for the API description (a job of this type
    /// must match it). `None`: any JSON value.
    fn payload_schema(&self) -> Option<Value> {
        None
    }

    /// The flow key of a job of this type that was given none (a webhook's URL host and
    /// port): jobs of one key share the key's flow limits. `None`: no key.
    fn flow_key(&self, _payload: &Value) -> Option<String> {
        None
    }

    /// Checks a decoded payload for what its schema cannot say (a webhook's URL against the
    /// egress policy) when the job is scheduled; the error names the field
    /// (`payload.url: ...`) and the job is refused 422.
    fn admit(&self, _payload: &Self::Payload) -> Result<(), String> {
        Ok(())
    }
}

/// Why a payload is refused when its job is scheduled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayloadRefusal {
    /// It does not fit the type's schema (400).
    Invalid(String),
    /// It fits the schema, but the type refuses it (422).
    Unprocessable(String),
}

/// A handler with its payload type erased, as the runtime holds it.
#[async_trait]
pub trait ErasedHandler: Send + Sync + 'static {
    fn job_type(&self) -> &'static str;
    fn concurrency(&self) -> usize;
    fn share_per_topic(&self) -> Option<usize>;
    fn share_per_key(&self) -> Option<usize>;
    fn share_per_tenant(&self) -> Option<usize>;
    fn timeout(&self) -> Duration;
    async fn handle(&self, ctx: JobContext<Value>) -> Outcome;
    fn on_rearm(&self, rearmed: &Rearmed) -> Option<Emitted>;
    /// Whether `payload` decodes as this type's payload and the type admits it; the error
    /// names the field (`payload.url: missing field`).
    fn check_payload(&self, payload: &Value) -> Result<(), PayloadRefusal>;
    fn payload_schema(&self) -> Option<Value>;
    fn flow_key(&self, payload: &Value) -> Option<String>;
}

/// Decodes `payload` as `P`, naming the field that does not fit: `payload.url`.
fn decode_payload<P: serde::de::DeserializeOwned>(payload: &Value) -> Result<P, String> {
    match serde_path_to_error::deserialize::<_, P>(payload) {
        Ok(p) => Ok(p),
        Err(e) => {
            let inner = e.inner().to_string();
            let mut path = match e.path().to_string().as_str() {
                "." => "payload".to_string(),
                p => format!("payload.{p}"),
            };
            if let Some(name) = inner
                .strip_prefix("missing field `")
                .and_then(|r| r.split('`').next())
            {
                path = format!("{path}.{name}");
            }
            Err(format!("{path}: {inner}"))
        }
    }
}

/// A handler with what the door check needs worked out once, not on every schedule.
struct Typed<H> {
    handler: H,
    /// The type declares an object payload (an array of a struct's fields is refused).
    wants_object: bool,
}

impl<H: JobHandler> Typed<H> {
    fn new(handler: H) -> Self {
        let wants_object = handler.payload_schema().is_some_and(|s| {
            let t = &s["type"];
            t == "object"
                || t.as_array()
                    .is_some_and(|t| !t.contains(&"array".into()) && t.contains(&"object".into()))
        });
        Typed {
            handler,
            wants_object,
        }
    }
}

#[async_trait]
impl<H: JobHandler> ErasedHandler for Typed<H> {
    fn job_type(&self) -> &'static str {
        self.handler.job_type()
    }

    fn concurrency(&self) -> usize {
        self.handler.concurrency().max(1)
    }

    fn share_per_topic(&self) -> Option<usize> {
        self.handler.share_per_topic().map(|n| n.max(1))
    }

    fn share_per_key(&self) -> Option<usize> {
        self.handler.share_per_key().map(|n| n.max(1))
    }

    fn share_per_tenant(&self) -> Option<usize> {
        self.handler.share_per_tenant().map(|n| n.max(1))
    }

    fn timeout(&self) -> Duration {
        self.handler.timeout()
    }

    async fn handle(&self, ctx: JobContext<Value>) -> Outcome {
        let payload = match serde_json::from_value::<H::Payload>(ctx.payload) {
            Ok(p) => p,
            Err(e) => {
                return Outcome::dead(format!(
                    "payload does not fit job type {:?}: {e}",
                    self.handler.job_type()
                ));
            }
        };
        let typed = JobContext {
            topic: ctx.topic,
            settings: ctx.settings,
            job: ctx.job,
            payload,
            fired_at: ctx.fired_at,
            events: ctx.events,
            jobs: ctx.jobs,
            span: ctx.span,
        };
        self.handler.handle(typed).await
    }

    fn on_rearm(&self, rearmed: &Rearmed) -> Option<Emitted> {
        self.handler.on_rearm(rearmed)
    }

    fn check_payload(&self, payload: &Value) -> Result<(), PayloadRefusal> {
        // serde takes a struct from an array of its fields as well; a type that declares an
        // object payload means an object.
        if self.wants_object && payload.is_array() {
            return Err(PayloadRefusal::Invalid(
                "payload: expected an object, got an array".into(),
            ));
        }
        let decoded = decode_payload::<H::Payload>(payload).map_err(PayloadRefusal::Invalid)?;
        self.handler
            .admit(&decoded)
            .map_err(PayloadRefusal::Unprocessable)
    }

    fn payload_schema(&self) -> Option<Value> {
        self.handler.payload_schema()
    }

    fn flow_key(&self, payload: &Value) -> Option<String> {
        self.handler.flow_key(payload)
    }
}

/// The registered job types, by name.
#[derive(Clone, Default)]
pub struct Handlers {
    map: HashMap<&'static str, Arc<dyn ErasedHandler>>,
}

impl Handlers {
    /// No job types.
    pub fn new() -> Self {
        Handlers::default()
    }

    /// Registers a job type; a later registration of the same name replaces it.
    pub fn register<H: JobHandler>(&mut self, handler: H) -> &mut Self {
        let h: Arc<dyn ErasedHandler> = Arc::new(Typed::new(handler));
        self.map.insert(h.job_type(), h);
        self
    }

    /// Registers an already erased handler (how the runtime merges registries).
    pub fn insert_erased(&mut self, handler: Arc<dyn ErasedHandler>) -> &mut Self {
        self.map.insert(handler.job_type(), handler);
        self
    }

    /// The handler of a job type.
    pub fn get(&self, job_type: &str) -> Option<&Arc<dyn ErasedHandler>> {
        self.map.get(job_type)
    }

    /// Every registered handler.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn ErasedHandler>> {
        self.map.values()
    }
}
