//! `[webhooks]`: the egress policy, redirects, an egress proxy and the signing keys of the
//! `webhook` job type. The defaults are safe: only public addresses, no redirect, no proxy,
//! unsigned calls.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;

use super::signing::SigningKey;

/// The most redirect hops `webhooks.max_redirects` may allow.
pub const MAX_REDIRECTS: u32 = 10;

/// The `webhook` job type's settings.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhookSettings {
    /// Ranges calls may reach although they are not public (`127.0.0.0/8`, `10.1.0.0/16`,
    /// or a single address).
    pub allow_nets: Vec<Net>,
    /// Ranges calls may never reach, public or allowed; deny wins.
    pub deny_nets: Vec<Net>,
    /// An egress proxy every call goes through (`http://proxy:3128`); empty: none. Host
    /// names are then resolved by the proxy; literal addresses are still checked here.
    pub proxy: String,
    /// Redirect hops a call follows, each hop checked again; 0 (the default): a 3xx reply is
    /// a failure, as Standard Webhooks says.
    pub max_redirects: u32,
    /// Keys every call is signed with (`whsec_` + base64); several while a key is rotated.
    /// Empty: calls are not signed.
    pub signing_keys: Vec<SigningKey>,
    /// A topic's own keys, in place of `signing_keys` for its calls.
    pub topic_signing_keys: BTreeMap<String, Vec<SigningKey>>,
    /// Sign every topic's calls with `signing_keys` as they are, rather than with keys
    /// derived for each topic (the default). A receiver then trusts every writer of every
    /// topic: any of them can mint a call it accepts.
    pub shared_signing_keys: bool,
    /// The most of a reply's body read (its first characters go into `last_error`).
    #[serde(default = "max_reply_bytes")]
    pub max_reply_bytes: usize,
    /// Calls in flight at once on this instance, over every topic.
    pub max_in_flight: usize,
    /// Calls in flight at once for one topic: a topic whose receiver hangs holds this many
    /// of `max_in_flight`, and other topics' calls go on.
    pub max_in_flight_per_topic: usize,
    /// Calls in flight at once for one flow key of a topic (a receiver's host and port, or
    /// the job's `flow_key`): within its topic's share.
    pub max_in_flight_per_key: usize,
    /// Calls in flight at once for the topics of one tenant (`crate::tenant`), however many
    /// topics and keys it spreads them over: a team whose receivers hang holds this many of
    /// `max_in_flight`, and other teams' calls go on. Topics of no tenant take none.
    #[serde(default = "max_in_flight_per_tenant")]
    pub max_in_flight_per_tenant: usize,
    /// The longest `payload.timeout_ms` a job may ask for (422 past it); also the timeout of
    /// a job that asks for none, when shorter than 10 s.
    pub max_timeout_ms: u64,
}

/// One tenant's share by default: half the instance's calls.
fn max_in_flight_per_tenant() -> usize {
    MAX_IN_FLIGHT / 2
}

/// The defaults of the shares of calls in flight.
pub const MAX_IN_FLIGHT: usize = 64;
/// One topic's share by default: a quarter of the instance's calls.
pub const MAX_IN_FLIGHT_PER_TOPIC: usize = 16;
/// One key's share by default: half its topic's.
pub const MAX_IN_FLIGHT_PER_KEY: usize = 8;
/// The longest timeout a job may ask for by default.
pub const MAX_TIMEOUT_MS: u64 = 30_000;
/// The most `webhooks.max_timeout_ms` may be.
pub const MAX_TIMEOUT_CEILING_MS: u64 = 290_000;

/// 4 KiB: enough for a receiver's error, never a handler held by a huge body.
fn max_reply_bytes() -> usize {
    4 * 1024
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            allow_nets: Vec::new(),
            deny_nets: Vec::new(),
            proxy: String::new(),
            max_redirects: 0,
            signing_keys: Vec::new(),
            topic_signing_keys: BTreeMap::new(),
            shared_signing_keys: false,
            max_reply_bytes: max_reply_bytes(),
            max_in_flight: MAX_IN_FLIGHT,
            max_in_flight_per_topic: MAX_IN_FLIGHT_PER_TOPIC,
            max_in_flight_per_key: MAX_IN_FLIGHT_PER_KEY,
            max_in_flight_per_tenant: max_in_flight_per_tenant(),
            max_timeout_ms: MAX_TIMEOUT_MS,
        }
    }
}

impl WebhookSettings {
    /// Loopback allowed (127.0.0.0/8 and ::1): for a receiver on this host, as the tests and
    /// the tour use.
    pub fn allowing_loopback() -> Self {
        WebhookSettings {
            allow_nets: vec![
                Net(IpNet::new(IpAddr::from([127, 0, 0, 0]), 8).expect("a range")),
                Net(IpNet::from(IpAddr::from(std::net::Ipv6Addr::LOCALHOST))),
            ],
            ..WebhookSettings::default()
        }
    }

    /// The keys a topic's calls are signed with: its own when set; else the service's keys
    /// derived for the topic ([`SigningKey::for_topic`]), or as they are with
    /// `shared_signing_keys`.
    pub fn keys_for(&self, topic: &str) -> std::borrow::Cow<'_, [SigningKey]> {
        use std::borrow::Cow;
        match self.topic_signing_keys.get(topic) {
            Some(own) => Cow::Borrowed(own.as_slice()),
            None if self.shared_signing_keys => Cow::Borrowed(self.signing_keys.as_slice()),
            None => Cow::Owned(
                self.signing_keys
                    .iter()
                    .map(|k| k.for_topic(topic))
                    .collect(),
            ),
        }
    }

    /// Checks what serde cannot: the proxy's URL and the redirect limit; the error names
    /// the setting (and never repeats the proxy's credentials).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.max_redirects > MAX_REDIRECTS {
            return Err((
                "webhooks.max_redirects",
                format!("must be at most {MAX_REDIRECTS}"),
            ));
        }
        if !self.proxy.is_empty() {
            // The HTTP client is built without SOCKS: a socks5:// proxy would make every
            // call fail, so it is refused here, at start.
            let ok = url::Url::parse(&self.proxy)
                .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
            if !ok {
                return Err((
                    "webhooks.proxy",
                    "must be an http:// or https:// URL with a host (SOCKS is not supported)"
                        .into(),
                ));
            }
        }
        for (name, value) in [
            ("webhooks.max_in_flight", self.max_in_flight),
            (
                "webhooks.max_in_flight_per_topic",
                self.max_in_flight_per_topic,
            ),
            ("webhooks.max_in_flight_per_key", self.max_in_flight_per_key),
            (
                "webhooks.max_in_flight_per_tenant",
                self.max_in_flight_per_tenant,
            ),
        ] {
            if value == 0 {
                return Err((name, "must be at least 1".into()));
            }
        }
        if !(1..=MAX_TIMEOUT_CEILING_MS).contains(&self.max_timeout_ms) {
            return Err((
                "webhooks.max_timeout_ms",
                format!("must be 1 to {MAX_TIMEOUT_CEILING_MS}"),
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("allow_nets", &self.allow_nets)
            .field("deny_nets", &self.deny_nets)
            .field("proxy", &super::redact::url_text(&self.proxy))
            .field("max_redirects", &self.max_redirects)
            .field("max_reply_bytes", &self.max_reply_bytes)
            .field("max_in_flight", &self.max_in_flight)
            .field("max_in_flight_per_topic", &self.max_in_flight_per_topic)
            .field("max_in_flight_per_key", &self.max_in_flight_per_key)
            .field("max_timeout_ms", &self.max_timeout_ms)
            .field("signing_keys", &self.signing_keys.len())
            .field(
                "topic_signing_keys",
                &self.topic_signing_keys.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// A range of addresses: CIDR (`10.0.0.0/8`, `fc00::/7`) or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Net(pub IpNet);

impl TryFrom<String> for Net {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let t = text.trim();
        t.parse::<IpNet>()
            .or_else(|_| t.parse::<IpAddr>().map(IpNet::from))
            .map(|n| Net(n.trunc()))
            .map_err(|_| format!("{t:?} is not an address range (10.0.0.0/8, fc00::/7, 127.0.0.1)"))
    }
}

impl TryFrom<String> for SigningKey {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        SigningKey::parse(&text)
    }
}

impl<'de> Deserialize<'de> for SigningKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        SigningKey::parse(&text).map_err(serde::de::Error::custom)
    }
}
