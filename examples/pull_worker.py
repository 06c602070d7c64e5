#!/usr/bin/env python3
"""A pull consumer of timeout-center, standard library only.

It claims due jobs of a pull topic with a long poll, works on each, and acknowledges them in
one batch. A worker that dies before its ack leaves its jobs to come back when their lease
runs out, so every job is worked at least once.

    python3 examples/pull_worker.py --url http://127.0.0.1:8080 --topic orders

Set TOC_TOKEN when the service requires a bearer token. With --count N the worker stops
after N jobs (the test that runs this example uses it); otherwise it runs until stopped.
"""

import argparse
import json
import os
import sys
import urllib.parse
import urllib.request


def call(base, path, body, token):
    """One POST with a JSON body; the decoded answer (None for 204)."""
    req = urllib.request.Request(
        base.rstrip("/") + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=60) as res:
        text = res.read()
        return json.loads(text) if text else None


def work(job):
    """The job's work: here, print it. Raise to have the job retried."""
    print(json.dumps({"id": job["id"], "payload": job["payload"]}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("TOC_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--topic", required=True)
    parser.add_argument("--batch", type=int, default=100, help="most jobs per claim")
    parser.add_argument("--wait-ms", type=int, default=5000, help="long poll wait")
    parser.add_argument("--count", type=int, default=0, help="stop after this many jobs")
    args = parser.parse_args()
    token = os.environ.get("TOC_TOKEN")
    topic = urllib.parse.quote(args.topic, safe="")
    done = 0
    while args.count == 0 or done < args.count:
        claimed = call(args.url, f"/v1/topics/{topic}/claim",
                       {"max": args.batch, "wait_ms": args.wait_ms}, token)
        acks = []
        for job in claimed["jobs"]:
            try:
                work(job)
            except Exception as e:  # the job runs again after the topic's backoff
                path = f"/v1/topics/{topic}/jobs/{urllib.parse.quote(job['id'], safe='')}/retry"
                call(args.url, path, {"token": job["token"], "error": str(e)}, token)
                continue
            acks.append({"id": job["id"], "token": job["token"]})
        if acks:
            answer = call(args.url, f"/v1/topics/{topic}/acks", {"acks": acks}, token)
            done += sum(1 for r in answer["results"] if r == "done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
