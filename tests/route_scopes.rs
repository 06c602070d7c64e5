//! Scopes are judged on the route the router matched, never on the raw path: against a real
//! `toc serve` on each engine, every route of `/openapi.json` is sent, spelled many ways
//! (each segment's first letter percent-encoded in upper and lower hex, doubly encoded, with
//! `//`, `/./`, a trailing `/` and `;` parameters), with no token, a `read`, a `write`, an
//! `admin` and two pattern tokens, each answer checked against the table of what each route
//! needs; a property test then draws spellings at random (any letter encoded or not, in
//! either case).
//!
//! The oracle decodes a path as the router does (every escape but `%25`, `%2F` and `%2B`),
//! matches it against the route templates, and decodes `{topic}` fully as the handler does.
//! What this proves: no spelling of a path reaches a route whose need the token lacks, and a
//! spelling that matches no route is 404 for every caller. What it cannot: spellings the
//! HTTP layer refuses before routing (raw spaces, bytes outside ASCII) are not sent.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};

use common::RedisServer;
use common::process::{Skew, Toc, redis_env};

/// The tokens: name (its secret), scope rank (0 read, 1 write, 2 admin), topic pattern.
const TOKENS: &[(&str, u8, Option<&str>)] = &[
    ("v1ew", 0, None),
    ("wr1te", 1, None),
    ("adm1n", 2, None),
    ("vicw", 1, Some("vic*")),
    ("otheradm", 2, Some("other*")),
];

fn tokens_env() -> String {
    "v1ew:read,wr1te:write,adm1n,vicw:write:vic*,otheradm:admin:other*".into()
}

/// Which topics a route touches.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Topics {
    Named,
    None,
    Every,
}

/// What the table says a route needs: `None` when open to everyone.
fn need(method: &str, template: &str) -> Option<(u8, Topics)> {
    const ADMIN: &[(&str, &str)] = &[
        ("PUT", "/v1/topics/{topic}"),
        ("DELETE", "/v1/topics/{topic}"),
        ("POST", "/v1/topics/{topic}/dead/requeue"),
        ("POST", "/v1/topics/{topic}/dead/{id}/requeue"),
        ("DELETE", "/v1/topics/{topic}/dead/{id}"),
        ("DELETE", "/v1/topics/{topic}/dead"),
        ("PUT", "/v1/topics/{topic}/flows/{key}"),
        ("DELETE", "/v1/topics/{topic}/flows/{key}"),
        ("GET", "/v1/topics/{topic}/export"),
        ("POST", "/v1/topics/{topic}/import"),
    ];
    match template {
        "/health" | "/livez" | "/readyz" | "/metrics" | "/openapi.json" => return None,
        "/v1/token" | "/v1/slots" | "/v1/history" => return Some((0, Topics::None)),
        "/v1/topics" => return Some((0, Topics::Every)),
        _ => {}
    }
    if ADMIN.contains(&(method, template)) {
        Some((2, Topics::Named))
    } else if method == "GET" {
        Some((0, Topics::Named))
    } else {
        Some((1, Topics::Named))
    }
}

/// Every (method, template) of the API description.
fn routes(openapi: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, ops) in openapi["paths"].as_object().expect("paths") {
        for method in ops.as_object().expect("operations").keys() {
            if ["get", "put", "post", "delete", "patch"].contains(&method.as_str()) {
                out.push((method.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    out.sort();
    out
}

/// `template` with its parameters filled in.
fn concrete(template: &str) -> String {
    template
        .replace("{topic}", "victim")
        .replace("{id}", "j1")
        .replace("{key}", "k1")
}

fn hex(b: u8, upper: bool) -> String {
    if upper {
        format!("%{b:02X}")
    } else {
        format!("%{b:02x}")
    }
}

/// The spellings of `path` this test sends, each with a label.
fn spellings(path: &str) -> Vec<(String, String)> {
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    let join = |segs: &[String]| format!("/{}", segs.join("/"));
    let mut out = vec![("plain".to_string(), path.to_string())];
    for (i, seg) in segs.iter().enumerate() {
        let Some(first) = seg.bytes().next() else {
            continue;
        };
        let rest = &seg[1..];
        let mut each = |label: String, s: String| {
            let mut v: Vec<String> = segs.iter().map(|s| s.to_string()).collect();
            v[i] = s;
            out.push((label, join(&v)));
        };
        each(
            format!("seg{i} upper"),
            format!("{}{rest}", hex(first, true)),
        );
        each(
            format!("seg{i} lower"),
            format!("{}{rest}", hex(first, false)),
        );
        each(
            format!("seg{i} whole"),
            seg.bytes().map(|b| hex(b, true)).collect(),
        );
        each(
            format!("seg{i} double"),
            format!("%25{}{rest}", &hex(first, true)[1..]),
        );
        each(format!("seg{i} semicolon"), format!("{seg};x=1"));
        each(format!("seg{i} double slash"), format!("/{seg}"));
        each(format!("seg{i} dot"), format!("./{seg}"));
    }
    out.push(("trailing slash".into(), format!("{path}/")));
    out
}

/// Decodes `%XX` escapes; with `router`, as the router does (keeping `%25`, `%2F`, `%2B`).
fn decode(s: &str, router: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
            && !(router && [b'%', b'/', b'+'].contains(&v))
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The template `path` reaches for `method` (the most literal one when several match), and
/// its `{topic}` decoded as the handler sees it.
fn reached(
    routes: &[(String, String)],
    method: &str,
    path: &str,
) -> Option<(String, Option<String>)> {
    let routed = decode(path, true);
    let segs: Vec<&str> = routed.split('/').collect();
    let mut best: Option<(usize, String, Option<String>)> = None;
    for (m, t) in routes {
        if m != method {
            continue;
        }
        let tsegs: Vec<&str> = t.split('/').collect();
        if tsegs.len() != segs.len() {
            continue;
        }
        let mut topic = None;
        let mut literal = 0;
        let ok = tsegs.iter().zip(&segs).all(|(t, s)| {
            if t.starts_with('{') {
                if *t == "{topic}" {
                    topic = Some(decode(s, false));
                }
                !s.is_empty()
            } else {
                literal += 1;
                t == s
            }
        });
        if ok && best.as_ref().is_none_or(|b| literal > b.0) {
            best = Some((literal, t.clone(), topic));
        }
    }
    best.map(|(_, t, topic)| (t, topic))
}

fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => name
            .strip_prefix(head)
            .is_some_and(|tail| (0..=tail.len()).any(|i| glob(rest, &tail[i..]))),
    }
}

/// What the table says of `token` sending `method path`: `Some(status)` when it must be
/// refused (401, 403, or 404 for a path no route matches), `None` when it must not be.
fn expected(
    routes: &[(String, String)],
    method: &str,
    path: &str,
    token: Option<(u8, Option<&str>)>,
) -> Option<u16> {
    let Some((template, topic)) = reached(routes, method, path) else {
        // Another method of a matched path is 405; no match at all is 404.
        let any = ["GET", "PUT", "POST", "DELETE"]
            .iter()
            .any(|m| reached(routes, m, path).is_some());
        return Some(if any { 405 } else { 404 });
    };
    let (rank, topics) = need(method, &template)?;
    let Some((have, pattern)) = token else {
        return Some(401);
    };
    if have < rank {
        return Some(403);
    }
    let covered = match (pattern, topics) {
        (None, _) | (_, Topics::None) => true,
        (Some(_), Topics::Every) => false,
        (Some(p), Topics::Named) => topic.as_deref().is_some_and(|t| glob(p, t)),
    };
    (!covered).then_some(403)
}

/// Sends `method path` raw (no client rewrites the path), with `token`: the status.
fn send(port: u16, method: &str, path: &str, token: Option<&str>) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("toc serve answers");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let body = if method == "GET" { "" } else { "{}" };
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).expect("a status line");
    let line = String::from_utf8_lossy(&head);
    line[9..12].parse().expect("a status code")
}

/// Checks one (method, path, token) against the table; the mismatch, if any.
fn check(
    port: u16,
    routes: &[(String, String)],
    method: &str,
    path: &str,
    token: Option<(&str, u8, Option<&str>)>,
) -> Result<(), String> {
    let expect = expected(routes, method, path, token.map(|(_, r, p)| (r, p)));
    let got = send(port, method, path, token.map(|t| t.0));
    let ok = match expect {
        Some(405) => matches!(got, 404 | 405),
        Some(e) => got == e,
        None => !matches!(got, 401 | 403),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{method} {path} with {:?}: got {got}, the table says {}",
            token.map(|t| t.0),
            expect.map_or("not 401 nor 403".into(), |e| e.to_string())
        ))
    }
}

/// A `toc serve` with the tokens, a topic `victim` and its job `j1`; the routes of its API.
async fn serve(
    engine: &str,
    dir: &std::path::Path,
) -> (Toc, Option<RedisServer>, Vec<(String, String)>) {
    let mut env = vec![("TOC_TOKENS", tokens_env())];
    let redis = (engine == "redis").then(RedisServer::start);
    if let Some(r) = &redis {
        env.extend(redis_env(r.url()));
    }
    let toc = Toc::start(engine, &env, Skew::None, dir).await;
    let http = reqwest::Client::new();
    let r = http
        .put(toc.url("/v1/topics/victim"))
        .bearer_auth("adm1n")
        .json(&json!({"slots": 2}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let r = http
        .put(toc.url("/v1/topics/victim/jobs/j1"))
        .bearer_auth("adm1n")
        .json(&json!({"delay_ms": 3_600_000}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let openapi: Value = http
        .get(toc.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (toc, redis, routes(&openapi))
}

/// Whether `victim` is still there as it was: not paused, its job `j1` scheduled.
async fn victim_untouched(toc: &Toc) {
    let http = reqwest::Client::new();
    let get = |p: &str| http.get(toc.url(p)).bearer_auth("adm1n").send();
    let topic: Value = get("/v1/topics/victim")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(topic["paused"], json!(false), "{topic}");
    let job: Value = get("/v1/topics/victim/jobs/j1")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(job["state"], "scheduled", "{job}");
}

async fn every_spelling_of_every_route_is_judged_by_the_route_it_reaches(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (toc, _redis, routes) = serve(engine, dir.path()).await;
    assert!(routes.len() >= 30, "the API's routes: {routes:?}");
    let mut failures = Vec::new();
    let mut sent = 0;
    // First every call that must be refused or is harmless, then the calls that may change
    // the victim (an admin's and the write token's), so that the check between them sees
    // what the refused calls did.
    for phase in [false, true] {
        for (method, template) in &routes {
            for (_, path) in spellings(&concrete(template)) {
                let callers =
                    std::iter::once(None).chain(TOKENS.iter().map(|&(t, r, p)| Some((t, r, p))));
                for token in callers {
                    let refused =
                        expected(&routes, method, &path, token.map(|(_, r, p)| (r, p))).is_some();
                    let may_change = method != "GET" && !refused;
                    if may_change != phase {
                        continue;
                    }
                    sent += 1;
                    if let Err(e) = check(toc.port, &routes, method, &path, token) {
                        failures.push(e);
                    }
                }
            }
        }
        if !phase {
            victim_untouched(&toc).await;
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {sent} calls answered against the table:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{engine}: {sent} calls (routes × spellings × callers) answered as the table says");
    proptest_spellings(toc.port, &routes);
}

/// Random spellings: each letter of a route's path encoded or not, in either case, and the
/// topic either the victim or a pattern token's own.
fn proptest_spellings(port: u16, routes: &[(String, String)]) {
    let routes = routes.to_vec();
    let n = routes.len();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
    let strategy = (
        0..n,
        proptest::collection::vec(0u8..4, 64),
        0..TOKENS.len(),
        any::<bool>(),
    );
    runner
        .run(&strategy, |(r, choices, t, other_topic)| {
            let (method, template) = &routes[r];
            let path = concrete(template);
            let path = if other_topic {
                path.replace("victim", "victory")
            } else {
                path
            };
            // 0: as is; 1: upper hex; 2: lower hex; 3: doubly encoded. `/` stays.
            let mut spelled = String::new();
            for (i, c) in path.bytes().enumerate() {
                let choice = if c == b'/' {
                    0
                } else {
                    choices[i % choices.len()]
                };
                match choice {
                    1 => spelled.push_str(&hex(c, true)),
                    2 => spelled.push_str(&hex(c, false)),
                    3 => spelled.push_str(&format!("%25{}", &hex(c, true)[1..])),
                    _ => spelled.push(char::from(c)),
                }
            }
            let (tok, rank, pat) = TOKENS[t];
            if method != "GET" && expected(&routes, method, &spelled, Some((rank, pat))).is_none() {
                // Allowed calls that change state are the table test's; here only reads
                // and refusals, so the victim stays as it was.
                return Ok(());
            }
            check(port, &routes, method, &spelled, Some((tok, rank, pat)))
                .map_err(TestCaseError::fail)
        })
        .unwrap();
}

#[actix_rt::test]
async fn spellings_on_memory() {
    every_spelling_of_every_route_is_judged_by_the_route_it_reaches("memory").await;
}

#[actix_rt::test]
async fn spellings_on_redis() {
    every_spelling_of_every_route_is_judged_by_the_route_it_reaches("redis").await;
}

#[test]
fn the_oracle_decodes_as_the_router_does() {
    assert_eq!(decode("/v1/%74opics/%2574", true), "/v1/topics/%2574");
    assert_eq!(decode("%2574", false), "%74");
    assert_eq!(decode("a%2Fb", true), "a%2Fb");
    let routes = vec![
        ("DELETE".to_string(), "/v1/topics/{topic}".to_string()),
        (
            "POST".to_string(),
            "/v1/topics/{topic}/dead/requeue".to_string(),
        ),
        (
            "POST".to_string(),
            "/v1/topics/{topic}/dead/{id}/requeue".to_string(),
        ),
    ];
    assert_eq!(
        expected(&routes, "DELETE", "/v1/%74opics/victim", Some((1, None))),
        Some(403)
    );
    assert_eq!(
        expected(&routes, "DELETE", "/v1/%2574opics/victim", Some((1, None))),
        Some(404)
    );
    assert_eq!(
        expected(&routes, "DELETE", "/v1/%74opics/victim", Some((2, None))),
        None
    );
    assert_eq!(
        expected(
            &routes,
            "POST",
            "/v1/topics/%76ictim/dead/requeue",
            Some((2, Some("other*")))
        ),
        Some(403)
    );
}
