"""Signed webhooks checked by the Standard Webhooks reference library (`standardwebhooks`
from PyPI) in a real receiver, against real `toc serve` processes on both engines.

Three services in turn, the receiver unchanged, as an operator rotates a key:
  1. signing_keys = [old]       -> verifies with old, not with new
  2. signing_keys = [old, new]  -> verifies with old and with new (the rotation window)
  3. signing_keys = [new]       -> verifies with new, refused with old
Each topic signs with its own key, HKDF-SHA256 of the service's key (salt
"timeout-center/webhook-signing/v1", info the topic's name), computed here by hand and
checked against `toc webhooks signing-key --topic hooks`; a signature captured on topic
`hooks` must not verify with topic `billing`'s key, nor with the service's key itself (a
writer of one topic cannot mint a call another team's receiver accepts).
Each fire answers 500 first, so the retry must carry the same webhook-id. Then a job whose
URL carries a password and whose header carries a token: neither may appear in what the
service writes of its dead letter (last_error and all but the caller's own payload), the
events, /health, /metrics or the service's log (run at debug level).

    python3 scripts/webhooks.py TOC_BINARY REDIS_PORT

Prints "webhooks: N passed, M failed" and exits non-zero on a failure.
"""

import base64
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from toc_service import free_port, wait_up
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

OLD = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NEW = "whsec_c2Vjb25kLWtleS1vZi10aGUtcm90YXRpb24="
SECRETS = ["pa55word", "h3ader-t0ken", OLD[6:], NEW[6:]]

calls = []  # (path, headers, body)
lock = threading.Lock()
seen = {}


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        with lock:
            calls.append((self.path, headers, body))
            key = headers.get("x-toc-job-id", "") + self.path
            seen[key] = seen.get(key, 0) + 1
            nth = seen[key]
        path = self.path.split("?")[0]
        status = 500 if path == "/flaky" and nth == 1 else (404 if path == "/missing" else 200)
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass



def http(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Service:
    def __init__(self, toc, engine, redis_port, keys, log):
        self.port = free_port()
        env = dict(os.environ)
        env.update({
            "TOC_STORE": engine,
            "TOC_REDIS_URL": f"redis://127.0.0.1:{redis_port}/",
            "TOC_LISTEN": f"127.0.0.1:{self.port}",
            "TOC_RUNTIME_GRACE_MS": "500",
            # The receiver is on loopback, which the egress policy refuses by default.
            "TOC_WEBHOOKS_ALLOW_NETS": "127.0.0.0/8,::1",
            # Retries after 50 ms, below the service's default floor of 1 s.
            "TOC_LIMITS_MIN_RETRY_DELAY_MS": "0",
            "TOC_WEBHOOKS_SIGNING_KEYS": ",".join(keys),
            "RUST_LOG": "debug",
        })
        self.proc = subprocess.Popen([toc, "serve"], env=env, stdout=log, stderr=log)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_up(self.base, self.proc)
        status, body = http("PUT", self.base + "/v1/topics/hooks",
                            {"default_type": "webhook", "max_attempts": 3, "backoff": {"base_ms": 50, "max_ms": 1000}})
        assert status in (200, 201), (status, body)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def calls_of(job, n, secs=15):
    deadline = time.time() + secs
    while time.time() < deadline:
        with lock:
            mine = [c for c in calls if c[1].get("x-toc-job-id") == job]
        if len(mine) >= n:
            return mine
        time.sleep(0.05)
    raise AssertionError(f"{job}: fewer than {n} calls within {secs} s")


def topic_key(secret, topic):
    """RFC 5869 HKDF-SHA256, 32 bytes: the key `topic`'s receivers verify with."""
    ikm = base64.b64decode(secret[len("whsec_"):] + "==")
    prk = hmac.new(b"timeout-center/webhook-signing/v1", ikm, hashlib.sha256).digest()
    okm = hmac.new(prk, topic.encode() + b"\x01", hashlib.sha256).digest()
    return "whsec_" + base64.b64encode(okm).decode()


def cli_topic_key(toc, secret, topic):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOC_")}
    env["TOC_WEBHOOKS_SIGNING_KEYS"] = secret
    out = subprocess.run([toc, "webhooks", "signing-key", "--topic", topic], env=env,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def verifies(secret, call):
    try:
        Webhook(secret).verify(call[2], call[1])
        return True
    except WebhookVerificationError:
        return False


def main():
    toc, redis_port = sys.argv[1], int(sys.argv[2])
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{server.server_address[1]}"
    passed, failed = 0, 0

    def check(name, ok, detail=""):
        nonlocal passed, failed
        print(("ok   " if ok else "FAIL ") + name + (f": {detail}" if detail and not ok else ""), flush=True)
        if ok:
            passed += 1
        else:
            failed += 1

    for secret in (OLD, NEW):
        check("toc webhooks signing-key gives the topic's HKDF key",
              cli_topic_key(toc, secret, "hooks") == topic_key(secret, "hooks"))
    phases = [("old", [OLD], {OLD: True, NEW: False}),
              ("old+new", [OLD, NEW], {OLD: True, NEW: True}),
              ("new", [NEW], {OLD: False, NEW: True})]
    for engine in ["memory", "redis"]:
        for name, keys, expect in phases:
            with tempfile.TemporaryFile() as log:
                svc = Service(toc, engine, redis_port, keys, log)
                job = f"{engine}-{name}"
                status, body = http("PUT", f"{svc.base}/v1/topics/hooks/jobs/{job}",
                                    {"type": "webhook", "delay_ms": 0,
                                     "payload": {"url": hook + "/flaky", "body": {"job": job, "amount": 12.5}}})
                check(f"{engine} {name}: scheduled", status == 201, f"{status} {body}")
                first, second = calls_of(job, 2)
                check(f"{engine} {name}: webhook-id stable across the retry",
                      first[1]["webhook-id"] == second[1]["webhook-id"], f"{first[1]} {second[1]}")
                check(f"{engine} {name}: attempts 1 then 2",
                      (first[1]["x-toc-attempt"], second[1]["x-toc-attempt"]) == ("1", "2"))
                for secret, ok in expect.items():
                    which = "old" if secret == OLD else "new"
                    got = [verifies(topic_key(secret, "hooks"), c) for c in (first, second)]
                    check(f"{engine} {name}: {'verified' if ok else 'refused'} with the topic's {which} key",
                          got == [ok, ok], f"{got}")
                    forged = [verifies(topic_key(secret, "billing"), first), verifies(secret, first)]
                    check(f"{engine} {name}: refused with another topic's {which} key and with the service's own",
                          forged == [False, False], f"{forged}")
                svc.stop()
        # No secret in any output.
        with tempfile.TemporaryFile() as log:
            svc = Service(toc, engine, redis_port, [NEW], log)
            job = f"{engine}-secret"
            url = hook.replace("http://", "http://user:pa55word@") + "/missing?token=pa55word"
            status, body = http("PUT", f"{svc.base}/v1/topics/hooks/jobs/{job}",
                                {"type": "webhook", "delay_ms": 0,
                                 "payload": {"url": url, "headers": {"authorization": "Bearer h3ader-t0ken"}}})
            check(f"{engine}: a job with secrets scheduled", status == 201, f"{status} {body}")
            calls_of(job, 1)
            deadline = time.time() + 10
            dead = ""
            while time.time() < deadline and job not in dead:
                dead = http("GET", f"{svc.base}/v1/topics/hooks/dead")[1]
                time.sleep(0.05)
            check(f"{engine}: dead after 404", job in dead and "404" in dead, dead)
            # The job's payload is the caller's own (GET answers it whole, behind a token);
            # everything the service wrote about it is checked: last_error and the rest.
            items = json.loads(dead)["items"]
            for item in items:
                item.pop("payload", None)
            outputs = {
                "dead letters less their payloads": json.dumps(items),
                "events": http("GET", f"{svc.base}/v1/topics/hooks/events")[1],
                "health": http("GET", f"{svc.base}/health")[1],
                "metrics": http("GET", f"{svc.base}/metrics")[1],
            }
            svc.stop()
            log.seek(0)
            outputs["log"] = log.read().decode(errors="replace")
            for where, text in outputs.items():
                leaked = [s for s in SECRETS if s in text]
                check(f"{engine}: no secret in {where}", not leaked, f"{leaked}")
    print(f"webhooks: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
