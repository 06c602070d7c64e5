"""The dashboard (/ui) in a real headless Chromium, driven by Playwright, against real
`toc serve` processes (the embedded store). Run by scripts/ui.sh, which installs Chromium
and Playwright; `python3 tests/ui/dashboard.py TOC_BINARY [SCREENSHOT_DIR]`.

Checks:
- the page loads with no console errors and shows the service's state;
- a topic appears once jobs are scheduled in it;
- a dead job requeued through its button changes state (and one deleted is gone);
- a topic's upcoming jobs are listed in fire-time order, page by page, and its running ones;
- the pause button pauses and resumes a topic (the API agrees);
- the slot table has one row per topic, and fires per second are drawn as a chart with
  axes and units, from the history the service keeps (a reloaded page draws it at once);
- with tokens set, the page shows nothing and changes nothing until given a token, and says
  whether a token is missing or was refused;
- each view has its own address (/ui/topics/T, .../jobs/ID, .../dead): opened directly, it
  shows that view, and choosing a topic or a job puts it in the address;
- a job is shown as fields, its instants as UTC dates; a scheduled job may be fired now or
  cancelled from its row (a write token's), and a read token is offered neither.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from playwright.sync_api import expect, sync_playwright

TOKEN = "dashboard-test-token"
READ_TOKEN = "dashboard-viewer"
WAIT_MS = 15_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base, method, path, body=None, token=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            text = res.read().decode()
            return res.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        return e.code, (json.loads(text) if text else None)


class Service:
    """`toc serve` on a free port with a pull topic `q` seeded; tokens when given. With
    `serve=False`, `binary` is a service of its own (`examples/custom_service.rs`), which takes
    no arguments and reads its settings file from TOC_CONFIG."""

    def __init__(self, binary, tokens=(), serve=True):
        self.dir = tempfile.mkdtemp(prefix="toc-ui-")
        config = os.path.join(self.dir, "toc.toml")
        with open(config, "w") as f:
            f.write('[[topics.seed]]\nname = "q"\nslots = 1\ndefault_type = "pull"\n')
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        env = dict(os.environ, TOC_LISTEN=f"127.0.0.1:{port}", TOC_TOKENS=",".join(tokens),
                   TOC_CONFIG=config, TOC_HTTP_HISTORY_EVERY_MS="1000")
        self.log = open(os.path.join(self.dir, "serve.log"), "w")
        args = [binary, "serve", "--config", config] if serve else [binary]
        self.proc = subprocess.Popen(args, env=env, stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while True:
            try:
                status, _ = call(self.base, "GET", "/health")
                if status in (200, 503):
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise SystemExit("toc serve did not start: see " + self.log.name)
            time.sleep(0.05)  # a poll of /health, every 50 ms of real time, up to 20 s

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def bury(svc, job_id, token=None):
    """A job of the pull topic `q`, claimed and buried: a dead letter."""
    status, body = call(svc.base, "PUT", f"/v1/topics/q/jobs/{job_id}", {"delay_ms": 0}, token)
    assert status in (200, 201), (status, body)
    deadline = time.time() + 10
    while True:
        status, body = call(svc.base, "POST", "/v1/topics/q/claim", {"max": 1, "wait_ms": 1000}, token)
        assert status == 200, (status, body)
        if body["jobs"]:
            break
        assert time.time() < deadline, "the job never came due"
    job = body["jobs"][0]
    assert job["id"] == job_id, job
    status, body = call(
        svc.base,
        "POST",
        f"/v1/topics/q/jobs/{job_id}/bury",
        {"token": job["token"], "error": "bad input"},
        token,
    )
    assert status == 204, (status, body)
    status, body = call(svc.base, "GET", f"/v1/topics/q/jobs/{job_id}", token=token)
    assert status == 200 and body["state"] == "dead", (status, body)


def check_open_service(browser, svc, shots):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    # Confirmations accepted; a prompt answered with its default.
    page.on("dialog", lambda d: d.accept(d.default_value) if d.type == "prompt" else d.accept())
    page.goto(svc.base + "/ui")
    expect(page.locator("#status")).to_contain_text("updated", timeout=WAIT_MS)
    expect(page.locator("#auth-needed")).to_be_hidden()

    # A topic appears once jobs are scheduled in it.
    expect(page.locator('#topics tr[data-topic="orders"]')).to_have_count(0)
    for i in range(3):
        status, body = call(svc.base, "PUT", f"/v1/topics/orders/jobs/o{i}", {"delay_ms": 600_000})
        assert status in (200, 201), (status, body)
    row = page.locator('#topics tr[data-topic="orders"]')
    expect(row).to_have_count(1, timeout=WAIT_MS)
    expect(row.locator("td").nth(2)).to_have_text("3", timeout=WAIT_MS)
    # Times as spans of one kind (in 9m 59s, not "in 599 s" beside "in 2 min"), the clock in UTC.
    expect(row.locator("td").nth(5)).to_have_text(re.compile(r"^in \d+m( \d+s)?$"), timeout=WAIT_MS)
    expect(page.locator("#status")).to_have_text(re.compile(r"^updated \d\d:\d\d:\d\dZ"), timeout=WAIT_MS)

    # Upcoming jobs, in fire-time order, page by page (20 a page): 22 more, the first due
    # soonest, one of them recurring.
    for i in range(22):
        body = {"delay_ms": 300_000 + i * 1_000}
        if i == 0:
            body = {"delay_ms": 300_000, "repeat": {"cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin", "limit": 5}}
        if i == 1:
            body["flow_key"] = "acme"
        status, body = call(svc.base, "PUT", f"/v1/topics/orders/jobs/u{i:02}", body)
        assert status in (200, 201), (status, body)
    row.click()
    upcoming = page.locator("#upcoming tbody tr")
    expect(upcoming).to_have_count(20, timeout=WAIT_MS)
    expect(upcoming.first).to_have_attribute("data-job", "u00")
    expect(upcoming.first).to_contain_text("Europe/Berlin")
    expect(upcoming.first).to_contain_text("5 of 5 fires left")
    expect(upcoming.nth(1)).to_contain_text("flow acme")
    expect(upcoming.nth(19)).to_have_attribute("data-job", "u19")
    page.click("#upcoming-next")
    expect(upcoming).to_have_count(5, timeout=WAIT_MS)
    expect(upcoming.first).to_have_attribute("data-job", "u20")
    expect(upcoming.nth(4)).to_have_attribute("data-job", "o2")
    expect(page.locator("#upcoming-next")).to_be_disabled()
    page.click("#upcoming-first")
    expect(upcoming.first).to_have_attribute("data-job", "u00", timeout=WAIT_MS)

    # The pause button pauses the topic on the service, and resumes it.
    toggle = row.locator("button.pause-toggle")
    expect(toggle).to_have_text("Pause")
    toggle.click()
    expect(toggle).to_have_text("Resume", timeout=WAIT_MS)
    status, topic = call(svc.base, "GET", "/v1/topics/orders")
    assert status == 200 and topic["paused"] is True, (status, topic)
    toggle.click()
    expect(toggle).to_have_text("Pause", timeout=WAIT_MS)
    status, topic = call(svc.base, "GET", "/v1/topics/orders")
    assert status == 200 and topic["paused"] is False, (status, topic)

    # One slot row per topic (orders has 16 slots, listed in its view), and the chart.
    expect(page.locator('#slots tr[data-topic="orders"]')).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator('#slots tr[data-topic="orders"] td').nth(1)).to_have_text("16")
    # The pull topic is listed too, saying its consumers serve it.
    expect(page.locator('#slots tr[data-topic="q"]')).to_contain_text("pull topic", timeout=WAIT_MS)
    expect(page.locator("#topic-slots tbody tr")).to_have_count(16, timeout=WAIT_MS)
    expect(page.locator("#rate-chart polyline.total")).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator("#rate-chart polyline.topic")).to_have_count(1, timeout=WAIT_MS)
    # The chart has axes with units (rates a second, UTC times), and its history is the
    # service's: a page opened anew draws the steps the service kept at its first draw
    # (the page's own samples began empty at every load).
    expect(page.locator("#rate-chart text.y-label").first).to_contain_text("/s")
    expect(page.locator("#rate-chart text.x-label").last).to_contain_text("UTC")
    deadline = time.time() + 15
    while True:
        status, kept = call(svc.base, "GET", "/v1/history")
        if status == 200 and len(kept["points"]) >= 4:
            break
        assert time.time() < deadline, f"the service kept no history: {kept}"
        time.sleep(0.2)
    page.reload()
    expect(page.locator("#rate-chart polyline.total")).to_have_count(1, timeout=WAIT_MS)
    drawn = page.locator("#rate-chart polyline.total").get_attribute("points").split()
    assert len(drawn) >= 4, f"a reloaded page draws the service's steps at once: {drawn}"
    expect(page.locator("#rate-note")).to_contain_text("kept by the service")

    # A running job: one of the pull topic's, claimed with a long lease.
    status, body = call(svc.base, "PUT", "/v1/topics/q/jobs/held", {"delay_ms": 0})
    assert status in (200, 201), (status, body)
    deadline = time.time() + 10
    while True:
        status, body = call(svc.base, "POST", "/v1/topics/q/claim", {"max": 1, "wait_ms": 1000, "lease_ms": 600_000})
        assert status == 200, (status, body)
        if body["jobs"]:
            break
        assert time.time() < deadline, "the job never came due"
    page.locator('#topics tr[data-topic="q"]').click()
    expect(page.locator('#running tr[data-job="held"]')).to_have_count(1, timeout=WAIT_MS)
    # A pull topic's lateness is its claims', apart from fires run in the service.
    expect(page.locator("#lateness-note")).to_contain_text("claimed by its consumers", timeout=WAIT_MS)
    expect(page.locator("#lateness-note")).to_contain_text("1 jobs of q", timeout=WAIT_MS)
    status, body = call(svc.base, "POST", "/v1/topics/q/jobs/held/ack", {"token": body["jobs"][0]["token"]})
    assert status == 204, (status, body)
    expect(page.locator('#running tr[data-job="held"]')).to_have_count(0, timeout=WAIT_MS)

    # Dead letters: requeue one through its button, delete another.
    bury(svc, "dead-1")
    bury(svc, "dead-2")
    q = page.locator('#topics tr[data-topic="q"]')
    expect(q.locator("td").nth(4)).to_have_text("2", timeout=WAIT_MS)
    q.click()
    expect(page.locator("#topic-name")).to_have_text("q")
    dead1 = page.locator('#dead tr[data-job="dead-1"]')
    expect(dead1).to_have_count(1, timeout=WAIT_MS)
    expect(dead1).to_contain_text("bad input")
    if shots:
        page.screenshot(path=os.path.join(shots, "ui-topic.png"), full_page=True)
    dead1.locator("button.requeue").click()
    expect(dead1).to_have_count(0, timeout=WAIT_MS)
    status, job = call(svc.base, "GET", "/v1/topics/q/jobs/dead-1")
    assert status == 200 and job["state"] == "scheduled", (status, job)
    dead2 = page.locator('#dead tr[data-job="dead-2"]')
    dead2.locator("button.delete").click()
    expect(dead2).to_have_count(0, timeout=WAIT_MS)
    status, _ = call(svc.base, "GET", "/v1/topics/q/jobs/dead-2")
    assert status == 404, status
    expect(q.locator("td").nth(4)).to_have_text("0", timeout=WAIT_MS)

    # Job lookup, as fields (instants as UTC dates), and its address.
    page.fill("#lookup-id", "dead-1")
    page.click("#lookup button")
    state = page.locator('#lookup-result tr[data-field="state"]')
    expect(state).to_contain_text("scheduled", timeout=WAIT_MS)
    fire_at = page.locator('#lookup-result tr[data-field="fire_at"]')
    expect(fire_at).to_contain_text("Z (", timeout=WAIT_MS)
    assert "/ui/topics/q/jobs/dead-1" in page.url, page.url
    # The events' tail.
    expect(page.locator("#events tbody")).to_contain_text("job.dead", timeout=WAIT_MS)
    expect(page.locator("#slots tbody tr").first).to_be_visible(timeout=WAIT_MS)
    if shots:
        page.locator('#topics tr[data-topic="orders"]').click()
        page.screenshot(path=os.path.join(shots, "ui-topics.png"), full_page=True)
    # An address per view: a reload keeps it, a job's address opens the job.
    page.goto(svc.base + "/ui/topics/orders")
    expect(page.locator("#topic-name")).to_have_text("orders", timeout=WAIT_MS)
    expect(page.locator('#upcoming tr[data-job="u00"]')).to_have_count(1, timeout=WAIT_MS)
    page.goto(svc.base + "/ui/topics/orders/jobs/u05")
    expect(page.locator('#lookup-result tr[data-field="id"]')).to_contain_text("u05", timeout=WAIT_MS)
    # Years, not thousands of hours, for a job years away.
    status, _ = call(svc.base, "PUT", "/v1/topics/orders/jobs/far", {"delay_ms": 3 * 366 * 86_400_000})
    assert status in (200, 201), status
    page.goto(svc.base + "/ui/topics/orders/jobs/far")
    expect(page.locator('#lookup-result tr[data-field="fire_at"]')).to_contain_text("(in 3y", timeout=WAIT_MS)
    page.goto(svc.base + "/ui/topics/q/dead")
    expect(page.locator("#topic-name")).to_have_text("q", timeout=WAIT_MS)
    page.locator('#topics tr[data-topic="orders"]').click()
    page.wait_for_url("**/ui/topics/orders", timeout=WAIT_MS)
    page.go_back()
    expect(page.locator("#topic-name")).to_have_text("q", timeout=WAIT_MS)
    # A scheduled job's actions: fire it now (it runs: gone from the topic), cancel another.
    page.goto(svc.base + "/ui/topics/orders")
    u03 = page.locator('#upcoming tr[data-job="u03"]')
    expect(u03).to_have_count(1, timeout=WAIT_MS)
    u03.locator("button.fire-now").click()
    expect(u03).to_have_count(0, timeout=WAIT_MS)
    deadline = time.time() + 10
    while call(svc.base, "GET", "/v1/topics/orders/jobs/u03")[0] != 404:
        assert time.time() < deadline, "u03 was not fired now"
        time.sleep(0.05)  # a poll of the API, every 50 ms of real time, up to 10 s
    # Reset by a span typed into the prompt (its default, 30m, accepted): the job moves from
    # about five minutes ahead to about thirty.
    u05 = page.locator('#upcoming tr[data-job="u05"]')
    u05.locator("button.reset-job").click()
    deadline = time.time() + 10
    while True:
        status, job = call(svc.base, "GET", "/v1/topics/orders/jobs/u05")
        if status == 200 and job["fire_at"] > time.time() * 1000 + 25 * 60_000:
            break
        assert time.time() < deadline, f"u05 was not reset to 30m: {job}"
        time.sleep(0.05)  # a poll of the API, every 50 ms of real time, up to 10 s
    # A series is triggered once now, its schedule kept.
    u00 = page.locator('#upcoming tr[data-job="u00"]')
    u00.locator("button.trigger-job").click()
    expect(page.locator("#events tbody")).to_contain_text("u00~", timeout=WAIT_MS)
    u04 = page.locator('#upcoming tr[data-job="u04"]')
    u04.locator("button.cancel-job").click()
    expect(u04).to_have_count(0, timeout=WAIT_MS)
    assert call(svc.base, "GET", "/v1/topics/orders/jobs/u04")[0] == 404
    # Labels shown, and the lists filtered by one.
    for i in range(2):
        status, body = call(svc.base, "PUT", f"/v1/topics/orders/jobs/lab-{i}",
                            {"delay_ms": 900_000, "labels": {"campaign": "spring"}})
        assert status in (200, 201), (status, body)
    page.goto(svc.base + "/ui/topics/orders")
    expect(page.locator('#upcoming tr[data-job="u00"]')).to_have_count(1, timeout=WAIT_MS)
    page.fill("#list-label", "campaign:spring")
    page.click("#list-filter button")
    expect(upcoming).to_have_count(2, timeout=WAIT_MS)
    expect(upcoming.first).to_contain_text("campaign:spring")
    # Every dead letter requeued at once from the dead letters' own form (dead-1, requeued
    # above, is cancelled first: the claims below take the pull topic's due jobs).
    status, _ = call(svc.base, "DELETE", "/v1/topics/q/jobs/dead-1")
    assert status == 204, status
    bury(svc, "dead-3")
    bury(svc, "dead-4")
    page.goto(svc.base + "/ui/topics/q/dead")
    expect(page.locator("#dead tbody tr")).to_have_count(2, timeout=WAIT_MS)
    page.click("#dead-requeue-all")
    expect(page.locator("#dead tbody tr")).to_have_count(0, timeout=WAIT_MS)
    for job_id in ("dead-3", "dead-4"):
        status, job = call(svc.base, "GET", f"/v1/topics/q/jobs/{job_id}")
        assert status == 200 and job["state"] == "scheduled", (status, job)
        status, _ = call(svc.base, "DELETE", f"/v1/topics/q/jobs/{job_id}")
        assert status == 204, status
    # And every one deleted at once.
    bury(svc, "dead-5")
    bury(svc, "dead-6")
    expect(page.locator("#dead tbody tr")).to_have_count(2, timeout=WAIT_MS)
    page.click("#dead-delete-all")
    expect(page.locator("#dead tbody tr")).to_have_count(0, timeout=WAIT_MS)
    for job_id in ("dead-5", "dead-6"):
        assert call(svc.base, "GET", f"/v1/topics/q/jobs/{job_id}")[0] == 404
    assert not errors, f"console errors: {errors}"
    page.close()
    print("dashboard: an address per view; a job as fields; fire now and cancel from a job's row; "
          "labels shown and filtered; every dead letter requeued at once")
    print("dashboard: loads with no console errors; a scheduled topic appears; upcoming and running "
          "jobs page in order; pause and resume; slots per topic; the fires chart; requeue and delete work")


# What a webhook job's payload keeps secret: none of it may reach a read token's page.
HOOK_SECRETS = ["pa55word", "T0s3cret", "k3yvalue", "h3ader-t0ken"]


def check_tokens(browser, svc):
    status, _ = call(svc.base, "PUT", "/v1/topics/secret/jobs/s1", {"delay_ms": 600_000}, TOKEN)
    assert status in (200, 201), status
    hook = {"type": "webhook", "delay_ms": 600_000, "payload": {
        "url": "https://ops:pa55word@hooks.example.com/services/T0s3cret?key=k3yvalue",
        "headers": {"Authorization": "Bearer h3ader-t0ken"}}}
    status, body = call(svc.base, "PUT", "/v1/topics/secret/jobs/hook-1", hook, TOKEN)
    assert status in (200, 201), (status, body)
    context = browser.new_context()
    page = context.new_page()
    page.on("dialog", lambda d: d.accept())
    page.goto(svc.base + "/ui")
    # Without a token: the page says it needs one and shows no topic.
    expect(page.locator("#auth-needed")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#topics tbody tr")).to_have_count(0)
    expect(page.locator("#views")).to_be_hidden()
    # A wrong token is refused, and told apart from none.
    page.fill("#token", "not-the-token")
    page.click("#token-form button")
    expect(page.locator("#auth-refused")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#auth-needed")).to_be_hidden()
    expect(page.locator("#status")).to_have_text("token refused")
    expect(page.locator("#topics tbody tr")).to_have_count(0)
    # With the token the page works, and keeps it in this tab's session storage only.
    page.fill("#token", TOKEN)
    page.click("#token-form button")
    expect(page.locator('#topics tr[data-topic="secret"]')).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator("#auth-needed")).to_be_hidden()
    expect(page.locator("#auth-refused")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('toc-token')") == TOKEN
    assert page.evaluate("localStorage.length") == 0
    # A new tab's session starts without it.
    other = context.new_page()
    other.goto(svc.base + "/ui")
    expect(other.locator("#auth-needed")).to_be_visible(timeout=WAIT_MS)
    context.close()
    # A read token: the page shows the topics, and offers no pause, requeue nor delete.
    context = browser.new_context()
    page = context.new_page()
    page.goto(svc.base + "/ui")
    page.fill("#token", READ_TOKEN)
    page.click("#token-form button")
    expect(page.locator('#topics tr[data-topic="secret"]')).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator("#status")).to_contain_text("a read token", timeout=WAIT_MS)
    expect(page.locator("#topics .pause-toggle")).to_have_count(0)
    # The webhook job, listed and looked up whole: its payload's secrets are redacted.
    page.click('#topics tr[data-topic="secret"] td >> nth=0')
    expect(page.locator('#upcoming tr[data-job="hook-1"]')).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator("#upcoming button.fire-now")).to_have_count(0)
    expect(page.locator("#dead-requeue-all")).to_be_hidden()
    expect(page.locator("#dead-delete-all")).to_be_hidden()
    expect(page.locator("#upcoming button.cancel-job")).to_have_count(0)
    page.fill("#lookup-id", "hook-1")
    page.click("#lookup button")
    expect(page.locator("#lookup-result")).to_contain_text("hooks.example.com", timeout=WAIT_MS)
    shown = page.content()
    leaked = [s for s in HOOK_SECRETS if s in shown]
    assert not leaked, f"a read token's page shows {leaked}"
    expect(page.locator("#lookup-result")).to_contain_text("***")
    # The admin token is offered the pause.
    page.fill("#token", TOKEN)
    page.click("#token-form button")
    expect(page.locator("#topics tr[data-topic=\"secret\"] .pause-toggle")).to_have_count(1, timeout=WAIT_MS)
    context.close()
    print("dashboard: with tokens set, refuses to work without the token; works with it; "
          "a read token sees the topics, no secret of a payload, and is offered no change")


def check_custom_service(browser, svc):
    """A job of the service's own type (send_reminder) is listed like any other."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    status, body = call(svc.base, "PUT", "/v1/topics/reminders/jobs/r-1",
                        {"type": "send_reminder", "delay_ms": 600_000,
                         "payload": {"user": "ada", "text": "stand-up"}})
    assert status == 201, (status, body)
    page.goto(svc.base + "/ui")
    row = page.locator('#topics tr[data-topic="reminders"]')
    expect(row).to_have_count(1, timeout=WAIT_MS)
    row.click()
    upcoming = page.locator("#upcoming tbody tr")
    expect(upcoming).to_have_count(1, timeout=WAIT_MS)
    expect(upcoming.first).to_have_attribute("data-job", "r-1")
    page.close()
    print("dashboard: a service of its own (examples/custom_service.rs) lists its type's jobs")


def main():
    binary = sys.argv[1]
    shots = sys.argv[2] if len(sys.argv) > 2 else None
    custom = sys.argv[3] if len(sys.argv) > 3 else os.environ.get("UI_CUSTOM_SERVICE")
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("chromium is missing: apt-get install -y chromium (scripts/ui.sh does)")
    open_svc = Service(binary)
    token_svc = Service(binary, tokens=[TOKEN, READ_TOKEN + ":read"])
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                check_open_service(browser, open_svc, shots)
                check_tokens(browser, token_svc)
                if custom:
                    custom_svc = Service(custom, serve=False)
                    try:
                        check_custom_service(browser, custom_svc)
                    finally:
                        custom_svc.stop()
            finally:
                browser.close()
    finally:
        open_svc.stop()
        token_svc.stop()


if __name__ == "__main__":
    main()
