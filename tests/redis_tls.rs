//! Redis over TLS with real processes: Debian's redis-server with `--tls-port` and
//! certificates this test makes with openssl (a CA, the server's, and a client certificate,
//! required: mutual TLS), reached by `toc serve` through `rediss://` with an ACL user that is
//! not `default`; and a failed connection (a wrong password) shows the password nowhere: not
//! in the log, not in `/health`.
//!
//! What this cannot prove: a managed service's own CA chain (the system's roots are used
//! there, and this test trusts only its own CA), or TLS on a Cluster and behind Sentinel,
//! which this session did not reach (issue 47 stays open for them).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use common::RedisServer;
use common::process::{Skew, Toc};

const PASSWORD: &str = "s3cret-acl-pw";

/// Runs openssl, or fails saying how to install it.
fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("openssl is missing ({e}): apt-get install -y openssl"));
    assert!(status.success(), "openssl {args:?}");
}

/// A CA, a server certificate for localhost and 127.0.0.1, and a client certificate.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=toc-test-ca",
        ],
    );
    // Version 3 certificates (extensions): rustls refuses version 1 ones.
    std::fs::write(
        dir.join("server.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.cnf"), "extendedKeyUsage=clientAuth\n").unwrap();
    for who in ["server", "client"] {
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{who}.key"),
                "-out",
                &format!("{who}.csr"),
                "-subj",
                &format!("/CN={who}"),
            ],
        );
        let mut args = vec!["x509", "-req", "-in", &*format!("{who}.csr")]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        args.extend(
            [
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &format!("{who}.crt"),
                "-days",
                "2",
            ]
            .map(String::from),
        );
        args.extend(["-extfile".to_string(), format!("{who}.cnf")]);
        openssl(dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    }
}

/// A node's TLS settings: its TLS port, certificates, client certificates required.
fn tls_args(dir: &Path, port: u16) -> Vec<String> {
    let path = |f: &str| dir.join(f).display().to_string();
    vec![
        "--tls-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        path("server.crt"),
        "--tls-key-file".into(),
        path("server.key"),
        "--tls-ca-cert-file".into(),
        path("ca.crt"),
        "--tls-auth-clients".into(),
        "yes".into(),
    ]
}

/// An ACL user of the service's own; the harness keeps `default` on its plain port.
fn add_user(node: &RedisServer) {
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "toc",
            "on",
            &format!(">{PASSWORD}"),
            "~*",
            "&*",
            "+@all",
        ])
        .query(&mut node.conn())
        .unwrap();
}

fn tls_redis(dir: &Path) -> (RedisServer, u16) {
    let port = common::redis_server::free_port();
    let args = tls_args(dir, port);
    let redis = RedisServer::start_with(&args.iter().map(String::as_str).collect::<Vec<_>>());
    add_user(&redis);
    (redis, port)
}

fn env(dir: &Path, port: u16, password: &str) -> Vec<(&'static str, String)> {
    let path = |f: &str| dir.join(f).display().to_string();
    vec![
        ("TOC_STORE", "redis".into()),
        (
            "TOC_REDIS_URL",
            format!("rediss://toc:{password}@localhost:{port}/"),
        ),
        ("TOC_REDIS_TLS_CA", path("ca.crt")),
        ("TOC_REDIS_TLS_CERT", path("client.crt")),
        ("TOC_REDIS_TLS_KEY", path("client.key")),
    ]
}

#[actix_rt::test]
async fn a_service_reaches_redis_over_tls_as_an_acl_user_with_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let (redis, port) = tls_redis(dir.path());
    let toc = Toc::start(
        "tls",
        &env(dir.path(), port, PASSWORD),
        Skew::None,
        dir.path(),
    )
    .await;
    let http = reqwest::Client::new();
    toc.put_job(&http, "t", "a", &json!({"delay_ms": 600_000}))
        .await;
    let job = toc.get_json(&http, "/v1/topics/t/jobs/a").await;
    assert_eq!(job["state"], "scheduled", "{job}");
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut redis.conn())
        .unwrap();
    assert!(
        clients.contains("user=toc"),
        "the service is connected as its ACL user: {clients}"
    );
    let health = toc.get_json(&http, "/health").await;
    assert_eq!(health["store"]["reachable"], true, "{health}");
}

#[actix_rt::test]
async fn a_failed_connection_never_shows_the_password() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let (_redis, port) = tls_redis(dir.path());
    let wrong = "wr0ng-pa55word";
    let toc = Toc::spawn("bad", &env(dir.path(), port, wrong), Skew::None, dir.path());
    // It may refuse to start or serve an unhealthy /health: either way, no password.
    let http = reqwest::Client::new();
    let health = crate::common::runtime::eventually(20, || async {
        let health = match http.get(toc.url("/health")).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(e) => e.to_string(),
        };
        if health.contains("\"reachable\":false") {
            Ok(health)
        } else {
            Err(format!(
                "the failure is not reported: {health} {}",
                toc.log_text()
            ))
        }
    })
    .await;
    let log = toc.log_text();
    assert!(
        health.contains("\"reachable\":false"),
        "the failure is reported: {health} {log}"
    );
    for out in [&log, &health] {
        assert!(!out.contains(wrong), "the password is shown: {out}");
    }
}

/// A Cluster of three primaries whose clients and bus speak TLS, reached through `rediss://`
/// seeds as the ACL user; the nodes announce their TLS ports to TLS clients.
#[actix_rt::test]
async fn a_service_reaches_a_cluster_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let ports: Vec<u16> = (0..3).map(|_| common::redis_server::free_port()).collect();
    let cluster = common::RedisCluster::start_each_with(|i| {
        let mut args = tls_args(dir.path(), ports[i]);
        args.extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(String::from));
        args
    });
    for node in &cluster.nodes {
        add_user(node);
    }
    let path = |f: &str| dir.path().join(f).display().to_string();
    let seeds: Vec<String> = ports
        .iter()
        .map(|p| format!("rediss://toc:{PASSWORD}@127.0.0.1:{p}/"))
        .collect();
    let env = vec![
        ("TOC_STORE", "redis".to_string()),
        ("TOC_REDIS_CLUSTER_NODES", seeds.join(",")),
        ("TOC_REDIS_TLS_CA", path("ca.crt")),
        ("TOC_REDIS_TLS_CERT", path("client.crt")),
        ("TOC_REDIS_TLS_KEY", path("client.key")),
    ];
    let toc = Toc::start("tls-cluster", &env, Skew::None, dir.path()).await;
    let http = reqwest::Client::new();
    for i in 0..8 {
        toc.put_job(&http, &format!("t{i}"), "a", &json!({"delay_ms": 600_000}))
            .await;
    }
    for i in 0..8 {
        let job = toc
            .get_json(&http, &format!("/v1/topics/t{i}/jobs/a"))
            .await;
        assert_eq!(job["state"], "scheduled", "{job}");
    }
    let log = toc.log_text();
    assert!(!log.contains(PASSWORD), "no password in the log");
    for node in &cluster.nodes {
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut node.conn())
            .unwrap();
        assert!(
            clients.contains("user=toc"),
            "every primary serves the ACL user over TLS: {clients}"
        );
    }
}

/// Behind a Sentinel reached over TLS, a primary reached over TLS as the ACL user.
#[actix_rt::test]
async fn a_service_reaches_a_primary_behind_sentinel_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let (primary, primary_tls) = tls_redis(dir.path());
    let sentinel_port = common::redis_server::free_port();
    let sentinel_tls = common::redis_server::free_port();
    let path = |f: &str| dir.path().join(f).display().to_string();
    let conf = dir.path().join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {sentinel_port}\nbind 127.0.0.1\ndir {}\ntls-port {sentinel_tls}\n\
             tls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\ntls-auth-clients yes\n\
             tls-replication yes\nsentinel monitor mymaster 127.0.0.1 {primary_tls} 1\n\
             sentinel auth-user mymaster toc\nsentinel auth-pass mymaster {PASSWORD}\n",
            dir.path().display(),
            path("server.crt"),
            path("server.key"),
            path("ca.crt"),
        ),
    )
    .unwrap();
    let found = Command::new("sh")
        .args(["-c", "command -v redis-sentinel"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "redis-sentinel is missing: apt-get install -y redis-sentinel"
    );
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _sentinel = Killed(
        Command::new("redis-sentinel")
            .arg(&conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Start-up: the sentinel answers on its plain port and knows the primary.
    crate::common::runtime::until(20, "the sentinel up, knowing the primary", || async {
        redis::Client::open(format!("redis://127.0.0.1:{sentinel_port}/"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(300)))
            .and_then(|mut c| {
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg("mymaster")
                    .query::<Vec<String>>(&mut c)
            })
            .is_ok_and(|a| a.get(1).map(String::as_str) == Some(primary_tls.to_string().as_str()))
    })
    .await;
    let env = vec![
        ("TOC_STORE", "redis".to_string()),
        (
            "TOC_REDIS_URL",
            format!("rediss://toc:{PASSWORD}@127.0.0.1:1/"),
        ),
        (
            "TOC_REDIS_SENTINELS",
            format!("rediss://127.0.0.1:{sentinel_tls}"),
        ),
        ("TOC_REDIS_TLS_CA", path("ca.crt")),
        ("TOC_REDIS_TLS_CERT", path("client.crt")),
        ("TOC_REDIS_TLS_KEY", path("client.key")),
    ];
    let toc = Toc::start("tls-sentinel", &env, Skew::None, dir.path()).await;
    let http = reqwest::Client::new();
    toc.put_job(&http, "t", "a", &json!({"delay_ms": 600_000}))
        .await;
    assert_eq!(
        toc.get_json(&http, "/v1/topics/t/jobs/a").await["state"],
        "scheduled"
    );
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut primary.conn())
        .unwrap();
    assert!(clients.contains("user=toc"), "{clients}");
    assert!(!toc.log_text().contains(PASSWORD), "no password in the log");
}
