//! Signed calls, per the Standard Webhooks specification: each call carries `webhook-id`,
//! `webhook-timestamp` and `webhook-signature`, the last a space-separated list of `v1,`
//! signatures (base64 of HMAC-SHA256 over `id.timestamp.body`), one per key, so that a
//! receiver keeps verifying while a key is rotated.
//!
//! A topic signs with keys of its own: each of the service's keys, put through HKDF-SHA256
//! with the salt [`TOPIC_KEY_SALT`] and the topic's name as its info, 32 bytes
//! ([`SigningKey::for_topic`]). A signature made for one topic therefore never verifies with
//! another topic's key, so a writer of one topic cannot mint a call that another team's
//! receiver accepts. The operator hands each receiver its topic's key (`toc webhooks
//! signing-key --topic T`); the service never shows a key over HTTP.

use std::fmt;

use base64::Engine;
use base64::alphabet;
use base64::engine::general_purpose::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use ring::hmac;

use crate::model::Job;

/// The HKDF salt of a topic's key.
pub const TOPIC_KEY_SALT: &[u8] = b"timeout-center/webhook-signing/v1";

/// A signing secret, written `whsec_` and base64. Its `Debug` never shows the secret.
#[derive(Clone)]
pub struct SigningKey {
    key: hmac::Key,
    secret: Vec<u8>,
}

impl SigningKey {
    /// Parses `whsec_` + base64 (the prefix may be left out). The error never repeats the
    /// secret.
    pub fn parse(text: &str) -> Result<Self, String> {
        let b64 = text.trim().strip_prefix("whsec_").unwrap_or(text.trim());
        // Padded or not, as the Standard Webhooks libraries take it.
        let lenient = GeneralPurpose::new(
            &alphabet::STANDARD,
            GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
        );
        let secret = lenient
            .decode(b64)
            .map_err(|_| "must be whsec_ followed by base64".to_string())?;
        if secret.len() < 16 {
            return Err("must hold at least 16 bytes (24 base64 characters)".into());
        }
        Ok(SigningKey::from_secret(secret))
    }

    fn from_secret(secret: Vec<u8>) -> Self {
        SigningKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, &secret),
            secret,
        }
    }

    /// The key `topic`'s calls are signed with: HKDF-SHA256 of this one, salt
    /// [`TOPIC_KEY_SALT`], info the topic's name, 32 bytes.
    pub fn for_topic(&self, topic: &str) -> SigningKey {
        let prk =
            ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, TOPIC_KEY_SALT).extract(&self.secret);
        let info = [topic.as_bytes()];
        let okm = prk
            .expand(&info, ring::hkdf::HKDF_SHA256)
            .expect("32 bytes are within HKDF's limit");
        let mut out = vec![0u8; 32];
        okm.fill(&mut out).expect("32 bytes");
        SigningKey::from_secret(out)
    }

    /// The key as a receiver is given it: `whsec_` and base64. For the command line only.
    pub fn reveal(&self) -> String {
        format!("whsec_{}", STANDARD.encode(&self.secret))
    }

    /// The `v1,` signature of one call.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(id.as_bytes());
        ctx.update(b".");
        ctx.update(timestamp.to_string().as_bytes());
        ctx.update(b".");
        ctx.update(body);
        format!("v1,{}", STANDARD.encode(ctx.sign().as_ref()))
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(whsec_***)")
    }
}

/// The `webhook-signature` header: one signature per key, space-separated.
pub fn signature(keys: &[SigningKey], id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter()
        .map(|k| k.sign(id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `webhook-id` of a fire: the same for every retry of it (a receiver's idempotency
/// key), different for each fire of a recurring job (its next instant differs) and for a job
/// made again under the same id (its creation time differs).
pub fn message_id(job: &Job) -> String {
    let mut d = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [
        job.topic.as_str(),
        job.id.as_str(),
        &job.created_at.unwrap_or_default().to_string(),
        &job.next_fire_at.unwrap_or_default().to_string(),
        &job.fires.to_string(),
    ] {
        d.update(part.as_bytes());
        d.update(&[0]);
    }
    let digest = d.finish();
    let hex: String = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("msg_{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's own example (the Standard Webhooks and Svix libraries test it).
    #[test]
    fn signs_as_the_specification_s_example() {
        let key = SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            key.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn one_signature_per_key_and_bad_keys_refused_without_echo() {
        let a = SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let b = SigningKey::parse("whsec_c2Vjb25kLWtleS1vZi10aGUtcm90YXRpb24=").unwrap();
        let both = signature(&[a.clone(), b.clone()], "msg_1", 5, b"{}");
        let parts: Vec<&str> = both.split(' ').collect();
        assert_eq!(
            parts,
            [a.sign("msg_1", 5, b"{}"), b.sign("msg_1", 5, b"{}")]
        );
        assert_ne!(parts[0], parts[1]);
        let err = SigningKey::parse("whsec_not*base64*secret").unwrap_err();
        assert!(!err.contains("secret"), "{err}");
        assert!(SigningKey::parse("whsec_c2hvcnQ=").is_err(), "too short");
        let unpadded = SigningKey::parse("whsec_c2Vjb25kLWtleS1vZi10aGUtcm90YXRpb24").unwrap();
        assert_eq!(
            unpadded.sign("m", 1, b""),
            b.sign("m", 1, b""),
            "padding optional"
        );
        assert!(!format!("{a:?}").contains("MfKQ"));
    }

    /// RFC 5869 by hand (HMAC-SHA256), so the derivation is checked against its definition,
    /// not against ring's HKDF alone; the Python receiver in scripts/webhooks.py does the same.
    #[test]
    fn a_topic_key_is_hkdf_of_the_service_key_and_the_topic() {
        let service = SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let hmac = |key: &[u8], data: &[u8]| {
            hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
                .as_ref()
                .to_vec()
        };
        let prk = hmac(TOPIC_KEY_SALT, &service.secret);
        let okm = hmac(&prk, b"orders\x01");
        let a = service.for_topic("orders");
        assert_eq!(a.secret, okm);
        assert_eq!(SigningKey::parse(&a.reveal()).unwrap().secret, okm);
        let b = service.for_topic("billing");
        assert_ne!(a.sign("m", 1, b"{}"), b.sign("m", 1, b"{}"));
        assert_ne!(a.sign("m", 1, b"{}"), service.sign("m", 1, b"{}"));
        assert!(!format!("{a:?}").contains(&a.reveal()[6..]));
    }

    #[test]
    fn a_fire_s_id_is_stable_across_retries_and_differs_between_fires() {
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "topic": "t", "id": "j", "type": "webhook", "payload": {}, "state": "running",
            "fire_at": 1000, "attempts": 1, "max_attempts": 3, "created_at": 10,
            "updated_at": 10, "last_error": null, "next_fire_at": 2000
        }))
        .unwrap();
        let first = message_id(&job);
        job.attempts = 2;
        job.fire_at = 1500;
        job.last_error = Some("503".into());
        assert_eq!(message_id(&job), first, "a retry keeps the id");
        job.next_fire_at = Some(3000);
        assert_ne!(
            message_id(&job),
            first,
            "the next fire of a schedule has its own"
        );
        job.next_fire_at = Some(2000);
        job.created_at = Some(11);
        assert_ne!(message_id(&job), first, "a job made again has its own");
    }
}
