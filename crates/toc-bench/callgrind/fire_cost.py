#!/usr/bin/env python3
"""Redis instructions per fire: what pump.lua and settle.lua cost redis-server, counted by
callgrind rather than timed (on a shared machine, timings swing by half from one minute to
the next; instruction counts repeat to about one percent).

It starts its own redis-server under `valgrind --tool=callgrind` on a free loopback port,
loads lua/ as one function library the way src/store/redis/scripts/library.rs builds it
(lib.lua's helpers, then each script as a function body), fills one slot with plain jobs,
and measures two cadences:

- alone: each job due at its own millisecond, pumped one at a time (a slot firing a job
  at a time, as at 10,000 fires/s over 16 slots), each run then settled alone in the short
  form the runtime sends;
- burst: every job due at once, pumped and settled in batches of 100;
- in turn: each job pumped alone and settled before the next is pumped, one figure for
  both (the run set holds one run at most, as a slot's does at 10,000 fires/s); then the
  same for jobs with a record (a webhook's type and payload);
- in turn with the batch window: each pump takes 2, 3 or 6 jobs due a millisecond apart,
  settled together (runtime.batch_window_ms gathering a slot's fires).

Usage: python3 crates/toc-bench/callgrind/fire_cost.py [--jobs 1000] [--repo .]
Needs valgrind and redis-server (Debian: apt-get install -y valgrind redis-server).
Prints instructions per job for the pump and the settle of each cadence.
"""

import argparse
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

KEYS = ["due", "run", "dead", "job", "seq", "events", "owner", "sizes"]
SCRIPTS = {"pump": ["allow-oom"], "settle": ["allow-oom"]}


def library(repo, name):
    lib = open(os.path.join(repo, "lua/lib.lua")).read()
    code = f"#!lua name={name}\n{lib}\n"
    for script, flags in SCRIPTS.items():
        body = open(os.path.join(repo, f"lua/{script}.lua")).read()
        quoted = ", ".join(f"'{f}'" for f in flags)
        code += (
            f"redis.register_function{{function_name='{name}_{script}', flags={{{quoted}}}, "
            f"callback=function(KEYS, ARGV)\nbind(KEYS)\n{body}\nend}}\n"
        )
    return code


class Redis:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self.read()

    def read(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Counter:
    """Instructions redis-server ran since the last reading (callgrind_control dumps)."""

    def __init__(self, pid, out_dir):
        self.pid, self.out_dir = pid, out_dir
        self.read()

    def read(self):
        before = set(glob.glob(os.path.join(self.out_dir, "callgrind.out.*")))
        subprocess.run(["callgrind_control", "-d", str(self.pid)], capture_output=True, check=True)
        for _ in range(100):
            new = set(glob.glob(os.path.join(self.out_dir, "callgrind.out.*"))) - before
            if new:
                path = new.pop()
                time.sleep(0.2)
                for line in open(path):
                    if line.startswith(("summary:", "totals:")):
                        return int(line.split()[1])
            time.sleep(0.1)
        raise RuntimeError("callgrind wrote no dump")


def fill(r, name, label, jobs, batch):
    """One slot's keys, with `jobs` plain jobs due at 1 (a burst) or at 1, 2, 3... ms."""
    keys = [f"{{fc:{name}:{label}}}:{k}" for k in KEYS]
    r.call("DEL", *keys)
    for start in range(0, jobs, 1000):
        pairs = []
        for j in range(start, min(jobs, start + 1000)):
            pairs += [1 if batch > 1 else j + 1, f"j{j}"]
        r.call("ZADD", keys[0], *pairs)
    r.call("HSET", keys[6], "marked", 1)
    return keys


def settle_args(handed):
    """The short form of each run handed out (the runtime's 'done' with no events)."""
    runs = []
    for job_id, record in handed:
        rec = json.loads(record)
        event = (
            '{"topic":"t","job_id":"%s","type":"noop","fire_at":%d,"fired_at":%d,'
            '"attempt":1,"event":"job.done","data":null}'
            % (job_id.decode(), rec["f"], rec["f"] + 1)
        )
        runs += [job_id, rec["k"], record, event]
    return runs


# A webhook's record: its type and payload (src/store/record.rs's fields t and p).
RICH = '{"t":"webhook","p":{"url":"http://127.0.0.1:9000/hook","body":{"order":"o-1"}}}'


def in_turn(r, counter, name, jobs, rich=False):
    """Each job pumped alone and settled before the next is pumped: a slot of a service
    firing 10,000 jobs/s over 16 slots, where the run set holds one run at most. With
    `rich`, each job has a record (a webhook's type and payload), under a marked member."""
    keys = fill(r, name, "rich" if rich else "turn", jobs, 1)
    if rich:
        r.call("DEL", keys[0])
        for start in range(0, jobs, 500):
            pairs, fields = [], []
            for j in range(start, min(jobs, start + 500)):
                pairs += [j + 1, f"j{j}\0"]
                fields += [f"j{j}", RICH]
            r.call("ZADD", keys[0], *pairs)
            r.call("HSET", keys[3], *fields)
    counter.read()
    for i in range(jobs):
        reply = r.call("FCALL", f"{name}_pump", 8, *keys, i + 1, 1, 30000, 3, 0)
        runs = settle_args([(reply[2], reply[3])])
        done = r.call("FCALL", f"{name}_settle", 8, *keys, i + 2, 3, 10000, "t", "noop", *runs)
        assert done == [b"done"], done
    return counter.read() / jobs


def windowed(r, counter, name, jobs, k):
    """In turn as above, but each pump takes the `k` jobs of its batch window (jobs due at
    1, 2, 3... ms, a pump reaching k - 1 ms past its now: runtime.batch_window_ms) and the
    `k` runs are settled in one call, as their slot actor gathers their outcomes."""
    keys = fill(r, name, f"w{k}", jobs, 1)
    counter.read()
    for i in range(jobs // k):
        now = i * k + 1
        reply = r.call("FCALL", f"{name}_pump", 8, *keys, now, 256, 30000, 3, 0, k - 1)
        handed = [(reply[j], reply[j + 1]) for j in range(2, len(reply), 2)]
        assert len(handed) == k, f"a window of {k} handed out {len(handed)}"
        runs = settle_args(handed)
        done = r.call("FCALL", f"{name}_settle", 8, *keys, now + k, 3, 10000, "t", "noop", *runs)
        assert done == [b"done"] * k, done
    return counter.read() / (jobs - jobs % k)


def cadence(r, counter, name, jobs, batch):
    keys = fill(r, name, str(batch), jobs, batch)
    counter.read()
    handed = []
    for i in range(jobs // batch):
        now = 1 if batch > 1 else i + 1
        reply = r.call("FCALL", f"{name}_pump", 8, *keys, now, batch, 30000, 3, 0)
        handed += [(reply[j], reply[j + 1]) for j in range(2, len(reply), 2)]
    pump = counter.read()
    assert len(handed) == jobs, f"handed {len(handed)} of {jobs}"
    for start in range(0, jobs, batch):
        runs = settle_args(handed[start:start + batch])
        done = r.call("FCALL", f"{name}_settle", 8, *keys, 5, 3, 10000, "t", "noop", *runs)
        assert done == [b"done"] * (len(runs) // 4), done
    settle = counter.read()
    return pump / jobs, settle / jobs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = ap.parse_args()
    for tool in ("valgrind", "callgrind_control", "redis-server"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            sys.exit(f"{tool} not found: apt-get install -y valgrind redis-server")
    port, out_dir = free_port(), tempfile.mkdtemp(prefix="fire-cost-")
    server = subprocess.Popen(
        # Only what a request costs is counted (reading and running it, writing its reply):
        # serverCron's ticks, whose number follows the wall clock, are left out.
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/callgrind.out.%p",
         "--toggle-collect=readQueryFromClient", "--toggle-collect=handleClientsWithPendingWrites",
         "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                r = Redis(port)
                r.call("PING")
                break
            except (OSError, RuntimeError):
                time.sleep(0.1)
        else:
            sys.exit("redis-server under callgrind did not start")
        name = "fc"
        r.call("FUNCTION", "LOAD", "REPLACE", library(args.repo, name))
        counter = Counter(server.pid, out_dir)
        print("cadence  pump/job  settle/job  (redis-server instructions)")
        for label, batch in (("alone", 1), ("burst", 100)):
            pump, settle = cadence(r, counter, name, args.jobs - args.jobs % batch, batch)
            print(f"{label:7s} {pump:9,.0f} {settle:11,.0f}")
        print(f"in turn: {in_turn(r, counter, name, args.jobs):,.0f} per fire (pump and settle)")
        rich = in_turn(r, counter, name, args.jobs, rich=True)
        print(f"in turn, a webhook's record: {rich:,.0f} per fire")
        for k in (2, 3, 6):
            cost = windowed(r, counter, name, args.jobs, k)
            print(f"in turn, {k} fires per pump and settle (the batch window): {cost:,.0f} per fire")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
