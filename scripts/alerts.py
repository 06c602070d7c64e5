"""The alert rules of config/prometheus/alerts.yml against series a real `toc serve` made.

Runs `toc serve` on a real Redis and scrapes its /metrics three times: at rest (s0); after
on-time jobs, jobs 3 s late and failing webhooks that retry and die (s1); and four seconds
into an outage of Redis, with jobs coming due (s2). The scrapes become promtool input
series (each counter and histogram a steady ramp from one scrape to the next, over 20 minutes
of rule time for s0 to s1 and 15 for s1 to s2; each gauge at the later scrape's value), and
`promtool test rules` checks that each rule fires when the run says it should and not
before: late fires, dead letters and retries in the first phase but not the store or pump
alerts; the store and the pumps in the outage. What it cannot show: `TocSlotsDown` firing
(a real run does not stop a slot's actor on demand; the rule is checked not to fire), and
the rules against Prometheus' own scrape timing (the ramps stand for it).

    python3 scripts/alerts.py TOC_BINARY
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from toc_service import free_port, wait_up

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$')
GAUGES = ("toc_store_up", "toc_slots_down", "toc_jobs", "toc_long_polls_waiting", "toc_flow_waiting_jobs",
          "toc_topic_unserved")



def call(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read()
            return r.status, (json.loads(text) if text and r.headers.get_content_type() == "application/json" else text.decode())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(base):
    status, text = call("GET", base + "/metrics")
    assert status == 200, (status, text)
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        if m:
            name, labels, value = m.group(1), m.group(2) or "{}", float(m.group(3))
            series[(name, labels)] = value
    return series


def with_instance(name, labels):
    inner = labels[1:-1]
    extra = 'instance="toc-a",job="toc"'
    return name + "{" + (inner + "," if inner else "") + extra + "}"


def values(name, points):
    """Per minute: a ramp between consecutive scrapes for counters, the later value for gauges."""
    out = []
    for (a, b, minutes) in points:
        for k in range(minutes):
            if name in GAUGES:
                out.append(b)
            else:
                out.append(a + (b - a) * (k + 1) / minutes)
    return out


def series_file(s0, s1, s2):
    keys = set(s0) | set(s1) | set(s2)
    input_series = []
    for key in sorted(keys):
        name, labels = key
        v0, v1, v2 = s0.get(key, 0.0), s1.get(key, s0.get(key, 0.0)), s2.get(key, s1.get(key, 0.0))
        vals = [v0] + values(name, [(v0, v1, 20), (v1, v2, 15)])
        input_series.append({
            "series": with_instance(name, labels),
            "values": " ".join(repr(round(v, 6)) for v in vals),
        })
    return input_series


def main(toc):
    work = tempfile.mkdtemp(prefix="toc-alerts-")
    redis_port, port = free_port(), free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL)
    env = dict(os.environ)
    env.update({
        "TOC_STORE": "redis",
        "TOC_REDIS_URL": f"redis://127.0.0.1:{redis_port}/",
        "TOC_LISTEN": f"127.0.0.1:{port}",
        "TOC_WEBHOOKS_ALLOW_NETS": "127.0.0.0/8,::1",
        "TOC_LIMITS_MIN_RETRY_DELAY_MS": "0",
        "TOC_RUNTIME_GRACE_MS": "200",
        "RUST_LOG": "warn",
    })
    log = open(os.path.join(work, "toc.log"), "w")
    toc_proc = subprocess.Popen([toc, "serve"], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_up(base, toc_proc)
        status, body = call("PUT", base + "/v1/topics/t",
                            {"max_attempts": 3, "backoff": {"base_ms": 50, "max_ms": 100}})
        assert status in (200, 201), (status, body)
        s0 = scrape(base)
        # A topic of a type no instance runs: unserved from the next ownership round on.
        status, body = call("PUT", base + "/v1/topics/u", {"types": ["nobody"]})
        assert status in (200, 201), (status, body)

        # On time, 3 s late, and webhooks to a closed port (two retries each, then dead).
        now = int(time.time() * 1000)
        closed = f"http://127.0.0.1:{free_port()}/hook"
        for i in range(20):
            assert call("PUT", f"{base}/v1/topics/t/jobs/on-{i}", {"delay_ms": 0})[0] == 201
        for i in range(5):
            assert call("PUT", f"{base}/v1/topics/t/jobs/late-{i}", {"fire_at": now - 3_000})[0] == 201
        for i in range(6):
            body = {"type": "webhook", "delay_ms": 0, "payload": {"url": closed}}
            assert call("PUT", f"{base}/v1/topics/t/jobs/hook-{i}", body)[0] == 201
        deadline = time.time() + 30
        while True:
            status, dead = call("GET", f"{base}/v1/topics/t/dead")
            if status == 200 and len(dead["items"]) == 6:
                break
            assert time.time() < deadline, f"the webhooks never died: {dead}"
            time.sleep(0.1)
        s1 = scrape(base)

        # An outage of the store while jobs come due: the pumps fail.
        for i in range(5):
            assert call("PUT", f"{base}/v1/topics/t/jobs/due-{i}", {"delay_ms": 1_500})[0] == 201
        redis.send_signal(signal.SIGKILL)
        redis.wait()
        time.sleep(4)
        s2 = scrape(base)
        for what, s in (("rest", s0), ("work", s1), ("outage", s2)):
            up = s.get(("toc_store_up", "{}"))
            fails = sum(v for (n, _), v in s.items() if n == "toc_pump_failures_total")
            dead = sum(v for (n, _), v in s.items() if n == "toc_jobs_dead_total")
            print(f"alerts: scrape at {what}: store_up {up}, pump failures {fails}, dead {dead}")
        assert s2.get(("toc_store_up", "{}")) == 0, "the outage shows in toc_store_up"

        rules = os.path.abspath("config/prometheus/alerts.yml")
        def alert(severity, summary, view=None, **labels):
            notes = {"summary": summary, "runbook": "docs/operations.md#alerts"}
            if view is not None:
                # A topic's alert links its view on the dashboard.
                notes["dashboard"] = "http://toc-a/ui/topics/" + labels["topic"] + view
            return {"exp_labels": {"severity": severity, "instance": "toc-a", **labels},
                    "exp_annotations": notes}
        late = alert("warning", "t: jobs fire over 1 s late (p99)", "", topic="t")
        dead_labels = alert("warning", "t: jobs went to the dead letters", "/dead", job="toc", topic="t")
        retries = alert("warning", "t: more than a tenth of the fires fail and retry", "", topic="t")
        store = alert("critical", "toc-a: the store does not answer", job="toc")
        pumps = alert("critical", "toc-a: pumps of t fail", "", topic="t")
        unserved = alert("critical", "u: no live instance runs its job types; its jobs wait", "", job="toc", topic="u")
        tests = {
            "rule_files": [rules],
            "evaluation_interval": "1m",
            "tests": [{
                "interval": "1m",
                "input_series": series_file(s0, s1, s2),
                "alert_rule_test": [
                    # The work phase: late fires, dead letters, retries; no outage yet.
                    {"eval_time": "19m", "alertname": "TocFiresLate", "exp_alerts": [late]},
                    {"eval_time": "19m", "alertname": "TocDeadLettersGrowing", "exp_alerts": [dead_labels]},
                    {"eval_time": "19m", "alertname": "TocRetriesRising", "exp_alerts": [retries]},
                    {"eval_time": "19m", "alertname": "TocStoreUnreachable", "exp_alerts": []},
                    {"eval_time": "19m", "alertname": "TocPumpsFailing", "exp_alerts": []},
                    {"eval_time": "19m", "alertname": "TocSlotsDown", "exp_alerts": []},
                    {"eval_time": "19m", "alertname": "TocTopicUnserved", "exp_alerts": [unserved]},
                    {"eval_time": "1m", "alertname": "TocTopicUnserved", "exp_alerts": []},
                    # Not before their `for`: lateness needs 5 minutes of it.
                    {"eval_time": "3m", "alertname": "TocFiresLate", "exp_alerts": []},
                    # The outage: the store and the pumps.
                    {"eval_time": "34m", "alertname": "TocStoreUnreachable", "exp_alerts": [store]},
                    {"eval_time": "34m", "alertname": "TocPumpsFailing", "exp_alerts": [pumps]},
                    {"eval_time": "34m", "alertname": "TocSlotsDown", "exp_alerts": []},
                ],
            }],
        }
        path = os.path.join(work, "alerts_test.yml")
        with open(path, "w") as f:
            json.dump(tests, f)
        r = subprocess.run(["promtool", "test", "rules", path], capture_output=True, text=True)
        print(r.stdout + r.stderr)
        if r.returncode != 0:
            raise SystemExit(f"promtool test rules failed (series and tests in {path})")
        print("alerts: every rule fires on the real run's series when it should, and not before")
    finally:
        toc_proc.send_signal(signal.SIGTERM)
        try:
            toc_proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            toc_proc.kill()
        if redis.poll() is None:
            redis.kill()


if __name__ == "__main__":
    main(sys.argv[1])
