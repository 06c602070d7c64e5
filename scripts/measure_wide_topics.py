"""What wide topics cost a `toc serve` (issue 47): 20 x PUT /v1/topics/wideN {"slots": 4096} on
the memory engine; the statuses, RSS and idle CPU before and after, and what /health weighs.
Not run by CI (it measures, it does not assert).

    python3 scripts/measure_wide_topics.py target/release/toc
"""
import json, os, socket, subprocess, sys, time, urllib.request

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def rss_kb(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"): return int(l.split()[1])

def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

binary = sys.argv[1]
port = free_port()
env = dict(os.environ, TOC_LISTEN=f"127.0.0.1:{port}", RUST_LOG="error")
p = subprocess.Popen([binary, "serve"], env=env)
base = f"http://127.0.0.1:{port}"
for _ in range(100):
    try: urllib.request.urlopen(base + "/health"); break
    except Exception: time.sleep(0.1)
time.sleep(2)
r0 = rss_kb(p.pid)
codes = []
for i in range(20):
    req = urllib.request.Request(f"{base}/v1/topics/wide{i}", data=json.dumps({"slots": 4096}).encode(), method="PUT", headers={"content-type": "application/json"})
    try: codes.append(urllib.request.urlopen(req).status)
    except urllib.error.HTTPError as e: codes.append(e.code)
time.sleep(5)
r1 = rss_kb(p.pid)
c0 = cpu_s(p.pid); time.sleep(10); c1 = cpu_s(p.pid)
t = time.time(); h = urllib.request.urlopen(base + "/health").read(); ht = time.time() - t
p.terminate(); p.wait()
print(f"{binary}: statuses {codes}; RSS {r0/1024:.0f} MB -> {r1/1024:.0f} MB; idle CPU {100*(c1-c0)/10:.0f}% of a core; /health {len(h)/1e6:.2f} MB in {ht:.2f} s")
