"""Traces end to end: `toc serve` with `otel.endpoint` set to a local OTLP/HTTP receiver (this
script's, decoding with `opentelemetry-proto`), a webhook receiver, and a pull consumer.

Checks: a job created by a request carrying a `traceparent` fires a webhook whose receiver
sees the same trace id; the receiver of spans has the HTTP request's span (a child of the
caller's), `create` (producer), `process` (consumer, child of and linked to `create`, with
the topic, job id, attempt, fire time and lateness), the webhook call (client) and `settle`,
all in the caller's trace; a traced reset's trace is the one the next fire continues (linked
to the `reset` span); a fire's JSON log line carries its trace and span ids; a pull job's claim carries its trace context, and an ack sent with
the consumer's own `traceparent` settles in the consumer's trace; a job created without one
keeps none. What it cannot: the sampling ratio's statistics (a ratio of 1 is used), or a
collector other than this receiver.

    python3 scripts/otel.py TOC_BINARY
"""

import http.server
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

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

spans = []
calls = []
lock = threading.Lock()

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
CONSUMER_TRACE = "0af7651916cd43dd8448eb211c80319c"
RESET_TRACE = "5d9e3c4f1a2b4c6d8e0f1a2b3c4d5e6f"



class Collector(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path == "/v1/traces":
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            with lock:
                for rs in req.resource_spans:
                    for ss in rs.scope_spans:
                        spans.extend(ss.spans)
        else:
            with lock:
                calls.append((self.path, dict(self.headers)))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def serve():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def call(method, url, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    h = {"content-type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def attrs(span):
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = v.string_value or v.int_value or v.bool_value or v.double_value
    return out


def wait_for(what, check, secs=20):
    deadline = time.time() + secs
    while time.time() < deadline:
        with lock:
            found = check()
        if found:
            return found
        time.sleep(0.1)
    with lock:
        names = [(s.name, s.trace_id.hex()) for s in spans]
    raise SystemExit(f"otel: {what} never arrived; spans: {names}")


def main(toc):
    port = serve()
    hook = f"http://127.0.0.1:{port}/hook"
    toc_port = free_port()
    env = dict(os.environ)
    env.update({
        "TOC_STORE": "memory",
        "TOC_LISTEN": f"127.0.0.1:{toc_port}",
        "TOC_OTEL_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "TOC_WEBHOOKS_ALLOW_NETS": "127.0.0.0/8,::1",
        "RUST_LOG": "warn,timeout_center::jobs::webhook=debug",
        "TOC_LOG_FORMAT": "json",
    })
    work = tempfile.mkdtemp(prefix="toc-otel-")
    log = open(os.path.join(work, "toc.log"), "w")
    proc = subprocess.Popen([toc, "serve"], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{toc_port}"
    try:
        wait_up(base, proc)
        caller = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
        body = {"type": "webhook", "delay_ms": 300, "payload": {"url": hook, "body": {"n": 1}}}
        status, job = call("PUT", f"{base}/v1/topics/hooks/jobs/traced", body, caller)
        assert status == 201, (status, job)
        assert job["traceparent"].split("-")[1] == CALLER_TRACE, job
        status, plain = call("PUT", f"{base}/v1/topics/hooks/jobs/plain", {"delay_ms": 600_000})
        assert status == 201 and "traceparent" not in plain, plain

        # The receiver sees the caller's trace.
        got = wait_for("the webhook call", lambda: [c for c in calls if c[0] == "/hook"])
        tp = {k.lower(): v for k, v in got[0][1].items()}.get("traceparent", "")
        assert tp.split("-")[1:2] == [CALLER_TRACE], f"the receiver's traceparent: {tp!r}"

        def named(prefix, trace=CALLER_TRACE):
            return [s for s in spans if s.name.startswith(prefix) and s.trace_id.hex() == trace]

        create = wait_for("create", lambda: named("create hooks"))[0]
        process = wait_for("process", lambda: named("process hooks"))[0]
        client = wait_for("the webhook's client span", lambda: named("POST"))[0]
        settle = wait_for("settle", lambda: named("settle hooks"))[0]
        request = wait_for("the HTTP request's span", lambda: [s for s in named("PUT") if s.kind == Span.SPAN_KIND_SERVER])[0]
        assert request.parent_span_id.hex() == CALLER_SPAN, "the request's span is the caller's child"
        assert create.kind == Span.SPAN_KIND_PRODUCER and create.parent_span_id == request.span_id
        assert process.kind == Span.SPAN_KIND_CONSUMER
        assert process.parent_span_id == create.span_id, "process is a child of create"
        assert [l.span_id for l in process.links] == [create.span_id], "process links to create"
        a = attrs(process)
        assert a["messaging.destination.name"] == "hooks" and a["messaging.message.id"] == "traced", a
        for key in ("toc.attempt", "toc.fire_at", "toc.lateness_ms"):
            assert key in a, (key, a)
        assert client.kind == Span.SPAN_KIND_CLIENT and client.parent_span_id == process.span_id
        assert tp.split("-")[2] == client.span_id.hex(), "the receiver's parent is the client span"
        assert attrs(client).get("http.response.status_code") == 200, attrs(client)
        assert attrs(settle).get("toc.outcome") == "done", attrs(settle)
        # The log line of the fire carries its trace and span ids (JSON: the spans it is in).
        log.flush()
        lines = [json.loads(l) for l in open(os.path.join(work, "toc.log")) if "webhook called" in l]
        assert lines, "no log line of the webhook call"
        fire = [sp for sp in lines[0].get("spans", []) if sp.get("name") == "process"]
        assert fire and fire[0].get("trace_id") == CALLER_TRACE, lines[0]
        assert fire[0].get("span_id") == process.span_id.hex(), (lines[0], process.span_id.hex())
        print(f"otel: the caller's trace {CALLER_TRACE} holds request, create, process (linked), "
              f"webhook and settle spans; the receiver saw it")

        # A traced reset: the job's fire continues the resetting request's trace.
        body = {"type": "webhook", "delay_ms": 600_000, "payload": {"url": hook + "/moved"}}
        assert call("PUT", f"{base}/v1/topics/hooks/jobs/moved", body, caller)[0] == 201
        resetter = {"traceparent": f"00-{RESET_TRACE}-a1b2c3d4e5f60718-01"}
        status, moved = call("POST", f"{base}/v1/topics/hooks/jobs/moved/reset", {"delay_ms": 200}, resetter)
        assert status == 200 and moved["traceparent"].split("-")[1] == RESET_TRACE, moved
        got = wait_for("the moved job's call", lambda: [c for c in calls if c[0] == "/hook/moved"])
        tp = {k.lower(): v for k, v in got[0][1].items()}.get("traceparent", "")
        assert tp.split("-")[1:2] == [RESET_TRACE], f"the moved job's traceparent: {tp!r}"
        reset_span = wait_for("reset", lambda: named("reset hooks", RESET_TRACE))[0]
        moved_fire = wait_for("the moved job's process", lambda: named("process hooks", RESET_TRACE))[0]
        assert [l.span_id for l in moved_fire.links] == [reset_span.span_id], "process links to the reset"
        print("otel: a traced reset's trace is the one the next fire continues")

        # A pull job: its claim carries the trace; an ack settles in the consumer's trace.
        status, _ = call("PUT", f"{base}/v1/topics/q", {"default_type": "pull"})
        assert status in (200, 201), status
        status, _ = call("PUT", f"{base}/v1/topics/q/jobs/p1", {"delay_ms": 0}, caller)
        assert status == 201, status
        status, claimed = call("POST", f"{base}/v1/topics/q/claim", {"max": 1, "wait_ms": 5000})
        assert status == 200 and claimed["jobs"], claimed
        job = claimed["jobs"][0]
        assert job["traceparent"].split("-")[1] == CALLER_TRACE, job
        mine = f"00-{CONSUMER_TRACE}-b7ad6b7169203331-01"
        status, _ = call("POST", f"{base}/v1/topics/q/jobs/p1/ack",
                         {"token": job["token"], "traceparent": mine})
        assert status == 204, status
        wait_for("the ack's settle", lambda: named("settle q", CONSUMER_TRACE))
        print("otel: a pull job's claim carries its trace; the ack settles in the consumer's")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main(sys.argv[1])
