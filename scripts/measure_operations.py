"""What operators' features cost and do, measured through real `toc serve` processes (issue 27):
a listing of a 100,000-job topic's next ten minutes, page by page; the fire rate limit on three
instances sharing one Redis; a pause during a burst (fires after the pause), on both engines.

    cargo build --release --bin toc && python3 scripts/measure_operations.py target/release/toc

Needs redis-server on the PATH. Prints one line per figure.
"""
import json, time, urllib.request, subprocess, socket, os, sys, collections

def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def call(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"null")

def start(toc, env_extra):
    p = port(); env = dict(os.environ, TOC_LISTEN=f"127.0.0.1:{p}", RUST_LOG="warn", **env_extra)
    proc = subprocess.Popen([toc, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{p}"
    for _ in range(200):
        try: call(base, "GET", "/health"); break
        except Exception: time.sleep(0.05)
    return proc, base

def redis():
    rp = port()
    proc = subprocess.Popen(["redis-server", "--port", str(rp), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    return proc, {"TOC_STORE": "redis", "TOC_REDIS_URL": f"redis://127.0.0.1:{rp}/"}

def schedule(bases, topic, n, at):
    for b in range(0, n, 1000):
        resets = [{"id": f"j-{i}", "fire_at": at} for i in range(b, min(n, b + 1000))]
        call(bases[b // 1000 % len(bases)], "POST", f"/v1/topics/{topic}/resets", {"resets": resets, "create": {}})

def fired_at(base, topic, n):
    out, after = [], None
    while True:
        q = f"/v1/topics/{topic}/events?limit=1000" + (f"&after={after}" if after else "")
        page = call(base, "GET", q)
        out += [e["fired_at"] for e in page["items"] if e["event"] == "job.fired"]
        after = page["next"]
        if not after: return out

def busiest(times, window=1000):
    t = sorted(times); best = start = 0
    for end in range(len(t)):
        while t[end] - t[start] >= window: start += 1
        best = max(best, end - start + 1)
    return best

def rate_limit(toc, limit, n):
    rs, env = redis()
    procs = [start(toc, env) for _ in range(3)]
    bases = [b for _, b in procs]
    call(bases[0], "PUT", "/v1/topics/rl", {"max_fires_per_s": limit})
    time.sleep(1.2)
    at = int(time.time() * 1000) + 1500
    schedule(bases, "rl", n, at)
    deadline = time.time() + n / limit + 30
    while time.time() < deadline:
        if call(bases[0], "GET", "/v1/topics/rl")["scheduled"] == 0 and call(bases[0], "GET", "/v1/topics/rl")["running"] == 0: break
        time.sleep(0.5)
    times = fired_at(bases[0], "rl", n)
    span = (max(times) - min(times)) / 1000
    print(f"rate limit {limit}/s, 3 instances on one Redis, {n} jobs due at once: {len(times)} fired over {span:.1f} s "
          f"= {len(times)/span:.0f}/s on average; the busiest second {busiest(times)} ({busiest(times)/limit:.3f}x the limit)")
    for p, _ in procs: p.terminate()
    rs.terminate()

def pause_burst(toc, engine, n):
    if engine == "redis":
        rs, env = redis(); procs = [start(toc, env) for _ in range(2)]
    else:
        rs, env = None, {"TOC_STORE": "memory"}; procs = [start(toc, env)]
    bases = [b for _, b in procs]
    call(bases[0], "PUT", "/v1/topics/burst", {"slots": 16})
    time.sleep(1.2)
    at = int(time.time() * 1000) + 1500
    schedule(bases, "burst", n, at)
    while time.time() * 1000 < at + 40: time.sleep(0.001)
    t0 = time.time() * 1000
    call(bases[-1], "PUT", "/v1/topics/burst", {"paused": True})
    paused_at = time.time() * 1000
    time.sleep(2.0)
    left = call(bases[0], "GET", "/v1/topics/burst")["scheduled"]
    resumed_at = time.time() * 1000
    call(bases[0], "PUT", "/v1/topics/burst", {"paused": False})
    while call(bases[0], "GET", "/v1/topics/burst")["scheduled"] > 0: time.sleep(0.2)
    time.sleep(1)
    times = fired_at(bases[0], "burst", n)
    before = sum(1 for t in times if t < t0)
    during = [t - paused_at for t in times if paused_at <= t < resumed_at]
    late = sum(1 for d in during if d >= 100)
    print(f"pause during a burst ({engine}, {len(procs)} instance(s), {n} jobs due at once): {before} fired before the pause "
          f"(sent {t0 - at:.0f} ms into the burst, answered in {paused_at - t0:.0f} ms); while paused (2 s): {len(during)} fired, "
          f"{late} of them later than 100 ms after the pause's answer (max {max(during) if during else 0:.0f} ms); {left} waited; "
          f"after the resume all {len(times)} had fired")
    for p, _ in procs: p.terminate()
    if rs: rs.terminate()


def listing(toc, engine, n=100_000):
    """A page of 1,000 of the next ten minutes of a topic of `n` resident jobs, timed."""
    import statistics
    rs, env = redis() if engine == "redis" else (None, {"TOC_STORE": "memory"})
    proc, base = start(toc, env)
    call(base, "PUT", "/v1/topics/devices", {"slots": 16})
    now = int(time.time() * 1000)
    for b in range(0, n, 1000):
        resets = [{"id": f"dev-{i}", "fire_at": now + 60_000 + (i * 3_600_000) // n} for i in range(b, b + 1000)]
        call(base, "POST", "/v1/topics/devices/resets", {"resets": resets, "create": {}})
    times, total, cursor = [], 0, None
    while True:
        q = f"/v1/topics/devices/jobs?from={now}&to={now + 600_000}&limit=1000" + (f"&cursor={cursor}" if cursor else "")
        t = time.perf_counter(); page = call(base, "GET", q); times.append((time.perf_counter() - t) * 1000)
        total += len(page["items"]); cursor = page["next"]
        if not cursor: break
    proc.terminate()
    if rs: rs.terminate()
    print(f"list ({engine}): {n} jobs resident, the next ten minutes = {total} jobs in {len(times)} pages of 1,000: "
          f"{statistics.mean(times):.1f} ms a page on average (min {min(times):.1f}, max {max(times):.1f})")

toc = sys.argv[1]
listing(toc, "memory")
listing(toc, "redis")
rate_limit(toc, 500, 6000)
pause_burst(toc, "memory", 20000)
pause_burst(toc, "redis", 20000)
