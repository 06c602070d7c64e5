// timeout-center dashboard: plain JavaScript over the HTTP API, refreshed by polling.
// The token (when the service has tokens) is kept in this tab's session storage only.
"use strict";

const REFRESH_MS = 2000;
const TOKEN_KEY = "toc-token";
const $ = (sel) => document.querySelector(sel);

const state = {
  topic: null,          // the selected topic
  fired: new Map(),     // topic -> [jobs_fired_total, when read]
  rates: new Map(),     // topic -> fired per second
  deadCursor: null,     // the dead page after this cursor is shown next
  deadShown: null,      // the cursor of the page on screen
  eventsAfter: null,    // the last event id shown
  locked: false,        // the service answered 401
  history: null,        // GET /v1/history as last read: {readAt, topic, every_ms, points}
  slots: [],            // /v1/slots' items, as last read
  scope: "admin",       // what the token may do (/v1/token): read, write or admin
  lists: {              // the selected topic's listings: the cursor of the page on screen, and the next
    upcoming: { shown: null, next: null },
    running: { shown: null, next: null },
  },
};

class Unauthorized extends Error {}

const RANK = { read: 0, write: 1, admin: 2 };
// Whether the token may do what needs `scope`: the page offers only what it may.
const may = (scope) => RANK[state.scope] >= RANK[scope];

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers);
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, Object.assign({}, options, { headers }));
  if (res.status === 401) throw new Unauthorized();
  const text = await res.text();
  const type = res.headers.get("content-type") || "";
  const body = type.includes("json") && text ? JSON.parse(text) : text;
  if (!res.ok && res.status !== 404) {
    const msg = body && body.error ? body.error.code + ": " + body.error.message : res.status + " " + text;
    throw new Error(path + ": " + msg);
  }
  return { status: res.status, body };
}

function cell(row, value, cls) {
  const td = row.insertCell();
  td.textContent = value === null || value === undefined ? "" : String(value);
  if (cls) td.className = cls;
  return td;
}

// The fire time of a parked job (src/time.rs, PARKED_AT): no fire planned until a reset.
const PARKED_AT = 99999999999999;

// How far an instant is from now, as a span (1m 49s; years past a year): "in …" or "… ago".
function ago(ms) {
  if (ms === null || ms === undefined) return "never";
  if (ms >= PARKED_AT) return "parked";
  const d = Date.now() - ms;
  if (Math.abs(d) < 1000) return d >= 0 ? "just now" : "in <1s";
  const text = span(Math.abs(d));
  return d >= 0 ? text + " ago" : "in " + text;
}

function showError(err) {
  const box = $("#error");
  if (!err) { box.hidden = true; return; }
  box.textContent = String(err.message || err);
  box.hidden = false;
}

// Locks the page on a 401: told apart, a token that was given and refused, and none given.
function lock(locked) {
  state.locked = locked;
  const given = !!sessionStorage.getItem(TOKEN_KEY);
  $("#auth-needed").hidden = !locked || given;
  $("#auth-refused").hidden = !locked || !given;
  $("#views").hidden = locked;
  if (locked) {
    for (const id of ["#topics", "#slots", "#dead", "#events", "#upcoming", "#running", "#topic-slots", "#lookup-result"]) $(id + " tbody").replaceChildren();
    $("#lateness").replaceChildren();
    $("#status").textContent = given ? "token refused" : "token needed";
  }
}

// A span of ms in words: 1m 30s, 2h 5m, 400 ms.
function span(ms) {
  if (ms < 1000) return ms + " ms";
  let s = Math.round(ms / 1000);
  const parts = [];
  for (const [unit, n] of [["y", 365 * 86400], ["d", 86400], ["h", 3600], ["m", 60], ["s", 1]]) {
    if (s >= n) { parts.push(Math.floor(s / n) + unit); s %= n; }
  }
  return parts.slice(0, 2).join(" ");
}

// An instant in UTC with how far it is from now; a parked job's says so.
function instant(ms) {
  if (ms >= PARKED_AT) return "parked: waits for a reset";
  return new Date(ms).toISOString().replace(".000Z", "Z") + " (" + ago(ms) + ")";
}

// A job as fields: instants as UTC dates with a countdown or an age, spans in words.
function showJob(j) {
  const rows = Object.entries(j).map(([k, v]) => {
    const row = document.createElement("tr");
    row.dataset.field = k;
    cell(row, k);
    let shown = v;
    if (v === null || v === undefined) shown = "—";
    else if (typeof v === "number" && k.endsWith("_at") || k === "lease_until") shown = instant(v);
    else if (typeof v === "number" && k.endsWith("_ms")) shown = span(v);
    else if (typeof v === "object") shown = JSON.stringify(v);
    cell(row, shown);
    return row;
  });
  $("#lookup-result tbody").replaceChildren(...rows);
}

// The view the address names: /ui/topics/{topic}, .../jobs/{id}, .../dead.
function viewOfPath() {
  const m = location.pathname.match(/^\/ui\/topics\/([^/]+)(?:\/(jobs)\/([^/]+)|\/(dead))?\/?$/);
  if (!m) return null;
  return { topic: decodeURIComponent(m[1]), job: m[3] ? decodeURIComponent(m[3]) : null, dead: !!m[4] };
}

// Puts the view in the address, so a reload or a link keeps it.
function showPath(path) {
  if (location.pathname !== path) history.pushState(null, "", path);
}

function topicUrl(name, rest) {
  return "/ui/topics/" + encodeURIComponent(name) + (rest || "");
}

// Prometheus text: counter values, and lateness buckets per topic, fires (firing lateness)
// and pull claims (claim lateness) apart.
function parseMetrics(text) {
  const fired = new Map();
  const buckets = new Map();
  const perTopic = { fires: new Map(), claims: new Map() };
  const add = (kind, topic, le, value) => {
    const m = perTopic[kind];
    if (!m.has(topic)) m.set(topic, new Map());
    m.get(topic).set(le, (m.get(topic).get(le) || 0) + value);
  };
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || !line.trim()) continue;
    const m = line.match(/^(\w+)\{([^}]*)\}\s+(\S+)$/);
    if (!m) continue;
    const labels = Object.fromEntries([...m[2].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    const value = Number(m[3]);
    if (m[1].endsWith("jobs_fired_total")) fired.set(labels.topic, value);
    if (m[1].endsWith("firing_lateness_seconds_bucket")) {
      buckets.set(labels.le, (buckets.get(labels.le) || 0) + value);
      add("fires", labels.topic, labels.le, value);
    }
    if (m[1].endsWith("claim_lateness_seconds_bucket")) add("claims", labels.topic, labels.le, value);
  }
  return { fired, buckets, perTopic };
}

// The lateness the page shows: the selected topic's (its fires, or a pull topic's claims),
// else every topic's fires.
function lateness(buckets, perTopic) {
  if (!state.topic) return [buckets, "jobs fired since the service started, by how late they fired (every topic's fires; a pull topic's claims are in its own view)"];
  const claims = perTopic.claims.get(state.topic);
  if (claims) return [claims, "jobs of " + state.topic + " claimed by its consumers, by how long they were due first (claims, not fires)"];
  return [perTopic.fires.get(state.topic) || new Map(), "jobs of " + state.topic + " fired, by how late they fired"];
}

function drawLateness(buckets, what) {
  const bounds = [...buckets.keys()].sort((a, b) => (a === "+Inf") - (b === "+Inf") || Number(a) - Number(b));
  let previous = 0;
  const counts = bounds.map((le) => {
    const c = buckets.get(le) - previous;
    previous = buckets.get(le);
    return { le, count: c };
  });
  const total = previous;
  const max = Math.max(1, ...counts.map((c) => c.count));
  const bars = counts.map(({ le, count }) => {
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.style.height = (100 * count / max) + "%";
    const label = le === "+Inf" ? "more" : "≤" + (Number(le) * 1000) + "ms";
    bar.title = label + ": " + count + " jobs";
    const span = document.createElement("span");
    span.textContent = label;
    const b = document.createElement("b");
    b.textContent = count ? String(count) : "";
    bar.append(b, span);
    return bar;
  });
  $("#lateness").replaceChildren(...bars);
  $("#lateness-note").textContent = total ? total + " " + what + "." : "None yet: " + what + ".";
}

async function refreshMetrics() {
  const res = await api("/metrics");
  if (res.status !== 200) return;
  const { fired, buckets, perTopic } = parseMetrics(res.body);
  const now = Date.now();
  for (const [topic, count] of fired) {
    const before = state.fired.get(topic);
    if (before && now > before[1]) state.rates.set(topic, ((count - before[0]) * 1000) / (now - before[1]));
    state.fired.set(topic, [count, now]);
  }
  drawLateness(...lateness(buckets, perTopic));
  await refreshHistory();
}

// The service's own last hour (GET /v1/history), read at load and at each of its steps.
async function refreshHistory() {
  const h = state.history || {};
  const due = !h.readAt || Date.now() - h.readAt >= (h.every_ms || 0);
  if (!due && h.topic === state.topic) return;
  const q = state.topic ? "?topic=" + encodeURIComponent(state.topic) : "";
  const { status, body } = await api("/v1/history" + q);
  if (status !== 200) return;
  state.history = { readAt: Date.now(), topic: state.topic, every_ms: body.every_ms, points: body.points };
  drawRates();
}

// A rate as a chart's axis shows it: whole numbers from 10 on, thousands as k.
const rateLabel = (v) => v >= 10000 ? (v / 1000).toFixed(0) + "k/s" : v >= 10 ? v.toFixed(0) + "/s" : v.toFixed(1) + "/s";

// Fires (and pull claims) per second over the service's last hour, with axes: every topic
// the token may see together, and the selected topic.
function drawRates() {
  const svg = $("#rate-chart");
  const points = (state.history && state.history.points) || [];
  const W = 640, H = 180, L = 56, B = 22, T = 8, R = 8;
  const ns = "http://www.w3.org/2000/svg";
  const el = (name, attrs, text) => {
    const e = document.createElementNS(ns, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const now = points.length ? points[points.length - 1].at : Date.now();
  const span = Math.max(60000, now - (points.length ? points[0].at : now));
  const from = now - span;
  const series = [["total", (p) => p.fired_per_s + p.claimed_per_s]];
  if (state.topic) series.push(["topic", (p) => p.topic ? p.topic.fired_per_s + p.topic.claimed_per_s : 0]);
  const max = Math.max(1, ...points.map((p) => p.fired_per_s + p.claimed_per_s));
  const x = (at) => L + ((at - from) / span) * (W - L - R);
  const y = (v) => H - B - (v / max) * (H - B - T);
  const children = [el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }),
    el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" })];
  for (const f of [0, 0.5, 1]) {
    children.push(el("line", { x1: L, y1: y(max * f), x2: W - R, y2: y(max * f), class: "grid" }));
    children.push(el("text", { x: L - 4, y: y(max * f) + 4, "text-anchor": "end", class: "y-label" }, rateLabel(max * f)));
  }
  for (const f of [0, 0.5, 1]) {
    const at = from + span * f;
    children.push(el("text", { x: x(at), y: H - 6, "text-anchor": f === 0 ? "start" : f === 1 ? "end" : "middle", class: "x-label" },
      new Date(at).toISOString().slice(11, 16) + (f === 1 ? " UTC" : "")));
  }
  for (const [cls, value] of series) {
    if (!points.length) continue;
    const line = el("polyline", { class: cls, points: points.map((p) => x(p.at).toFixed(1) + "," + y(value(p)).toFixed(1)).join(" ") });
    children.push(line);
  }
  svg.replaceChildren(...children);
  const last = points.length ? points[points.length - 1] : null;
  const every = state.history && state.history.every_ms ? Math.round(state.history.every_ms / 1000) + " s" : "";
  const selected = state.topic && last ? "; " + state.topic + " " + rateLabel(last.topic ? last.topic.fired_per_s + last.topic.claimed_per_s : 0) : "";
  $("#rate-note").textContent = last
    ? "Jobs fired and claimed a second on this instance, a step every " + every + " over the last " + span_text(span) +
      " (kept by the service). Last step: all topics " + rateLabel(last.fired_per_s + last.claimed_per_s) + selected + "."
    : "The service keeps a step every " + (every || "few seconds") + ": the first is drawn once it is taken.";
}

const span_text = (ms) => ms >= 3600000 ? (ms / 3600000).toFixed(0) + " h" : Math.round(ms / 60000) + " min";

async function refreshTopics() {
  const { body } = await api("/v1/topics");
  state.topics = body.items;
  const rows = body.items.map((t) => {
    const row = document.createElement("tr");
    row.dataset.topic = t.name;
    if (t.name === state.topic) row.className = "selected";
    cell(row, t.name);
    cell(row, t.default_type);
    cell(row, t.scheduled);
    cell(row, t.running);
    cell(row, t.dead, t.dead > 0 ? "bad" : "");
    cell(row, t.next_fire_at ? ago(t.next_fire_at) : "—");
    const rate = state.rates.get(t.name);
    cell(row, rate === undefined ? "—" : rate.toFixed(1));
    cell(row, t.max_fires_per_s || "—");
    const firing = row.insertCell();
    firing.className = t.paused ? "bad" : "";
    const toggle = document.createElement("button");
    toggle.className = "pause-toggle";
    toggle.textContent = t.paused ? "Resume" : "Pause";
    toggle.title = t.paused ? "Paused: resume firing on every instance" : "Firing: pause it on every instance";
    toggle.addEventListener("click", (ev) => {
      ev.stopPropagation();
      setPaused(t.name, !t.paused);
    });
    // Pausing changes a topic's settings: an admin token's.
    if (may("admin")) firing.append(t.paused ? "paused " : "firing ", toggle);
    else firing.append(t.paused ? "paused" : "firing");
    row.addEventListener("click", () => selectTopic(t.name));
    return row;
  });
  $("#topics tbody").replaceChildren(...rows);
}

async function setPaused(name, paused) {
  try {
    await api("/v1/topics/" + encodeURIComponent(name), { method: "PUT", body: JSON.stringify({ paused }) });
    await refreshTopics();
    showError(null);
  } catch (err) {
    handle(err);
  }
}

function slotRow(row, s) {
  cell(row, s.alive ? "yes" : "NO", s.alive ? "" : "bad");
  cell(row, s.in_flight);
  cell(row, ago(s.last_pump));
  cell(row, s.restarts, s.restarts > 0 ? "bad" : "");
  cell(row, s.last_error || "");
}

// Every slot this instance serves that the token may see, page by page (/v1/slots).
async function allSlots() {
  const out = [];
  let after = null;
  for (let page = 0; page < 64; page++) {
    const res = await api("/v1/slots?limit=1000" + (after ? "&after=" + encodeURIComponent(after) : ""));
    if (!res.body || !Array.isArray(res.body.items)) break;
    out.push(...res.body.items);
    if (!res.body.next) break;
    after = res.body.next;
  }
  return out;
}

// One row per topic: its slots this instance serves, summed.
async function refreshSlots() {
  state.slots = await allSlots();
  const byTopic = new Map();
  for (const s of state.slots) {
    if (!byTopic.has(s.topic)) byTopic.set(s.topic, []);
    byTopic.get(s.topic).push(s);
  }
  const rows = [...byTopic.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([topic, slots]) => {
    const row = document.createElement("tr");
    row.dataset.topic = topic;
    const alive = slots.filter((s) => s.alive).length;
    const pumps = slots.map((s) => s.last_pump).filter((p) => p !== null && p !== undefined);
    const restarts = slots.reduce((n, s) => n + s.restarts, 0);
    const errors = slots.filter((s) => s.last_error);
    cell(row, topic);
    cell(row, slots.length);
    cell(row, alive + " / " + slots.length, alive < slots.length ? "bad" : "");
    const waiting = slots.reduce((n, s) => n + (s.flow_waiting || 0), 0);
    const flight = slots.reduce((n, s) => n + s.in_flight, 0);
    cell(row, waiting ? flight + " (" + waiting + " waiting for room on their flow key)" : flight);
    cell(row, pumps.length ? ago(Math.min(...pumps)) : "never");
    cell(row, restarts, restarts > 0 ? "bad" : "");
    cell(row, errors.length ? errors.length + " slot(s): " + errors[0].last_error : "", errors.length ? "bad" : "");
    return row;
  });
  // A pull topic has no slot actors: its consumers' claims serve it.
  const pulls = (state.topics || []).filter((t) => t.default_type === "pull" && !byTopic.has(t.name)).map((t) => {
    const row = document.createElement("tr");
    row.dataset.topic = t.name;
    cell(row, t.name);
    cell(row, "none: a pull topic, served by its consumers' claims");
    for (let i = 0; i < 5; i++) cell(row, "");
    return row;
  });
  const all = [...rows, ...pulls].sort((a, b) => a.dataset.topic.localeCompare(b.dataset.topic));
  $("#slots tbody").replaceChildren(...all);
  if (state.topic) {
    const own = state.slots.filter((s) => s.topic === state.topic).map((s) => {
      const row = document.createElement("tr");
      cell(row, s.slot);
      slotRow(row, s);
      return row;
    });
    $("#topic-slots tbody").replaceChildren(...own);
  }
}

// A page of the selected topic's scheduled (upcoming) or running jobs, from `cursor`.
async function showList(which, cursor) {
  if (!state.topic) return;
  const kind = which === "upcoming" ? "scheduled" : "running";
  const label = $("#list-label").value.trim();
  const query = "?state=" + kind + "&limit=20" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "") +
    (label ? "&label=" + encodeURIComponent(label) : "");
  const { body } = await api(topicPath("/jobs" + query));
  const list = state.lists[which];
  list.shown = cursor;
  list.next = (body && body.next) || null;
  $("#" + which + "-next").disabled = !list.next;
  const rows = ((body && body.items) || []).map((j) => {
    const row = document.createElement("tr");
    row.dataset.job = j.id;
    cell(row, j.id);
    cell(row, j.type);
    if (which === "upcoming") {
      cell(row, ago(j.fire_at));
      cell(row, j.fire_at >= PARKED_AT ? "parked: waits for a reset" : new Date(j.fire_at).toISOString());
      cell(row, j.attempts + " / " + j.max_attempts);
      cell(row, schedule(j));
      cell(row, labels(j));
      // A scheduled job's actions, for a token that may write.
      const actions = row.insertCell();
      if (may("write")) actions.append(...jobActions(j));
    } else {
      cell(row, new Date(j.fire_at).toISOString());
      cell(row, ago(j.lease_until));
      cell(row, j.attempts + " / " + j.max_attempts);
      cell(row, j.next_fire_at ? new Date(j.next_fire_at).toISOString() : "");
    }
    return row;
  });
  $("#" + which + " tbody").replaceChildren(...rows);
}

function showLists() {
  return Promise.all([
    showList("upcoming", state.lists.upcoming.shown),
    showList("running", state.lists.running.shown),
  ]);
}

// A job's labels as key:value, the API's filter syntax.
function labels(j) {
  return Object.entries(j.labels || {}).map(([k, v]) => k + ":" + v).join(" ");
}

// A job's schedule in words: its pattern or period, where its series ends, its spread, and
// its flow key or expiry.
function schedule(j) {
  const parts = [];
  const r = j.repeat;
  if (r) {
    parts.push(r.cron ? r.cron + " " + (r.tz || "UTC") : "every " + r.every_ms + " ms");
    if (r.limit) parts.push((r.limit - (j.fires || 0)) + " of " + r.limit + " fires left");
    if (r.until) parts.push("until " + new Date(r.until).toISOString());
    if (r.jitter_ms) parts.push("+0–" + r.jitter_ms + " ms jitter");
    if (r.catchup_window_ms) parts.push("catch-up " + r.catchup_window_ms + " ms");
  }
  if (j.expire_after_ms !== undefined) parts.push("expires " + j.expire_after_ms + " ms late (" + (j.on_expire || "dead") + ")");
  if (j.flow_key) parts.push("flow " + j.flow_key);
  return parts.join(", ");
}

function topicPath(rest) {
  return "/v1/topics/" + encodeURIComponent(state.topic) + rest;
}

async function showDead(cursor) {
  if (!state.topic) return;
  const query = "?limit=20" + (cursor ? "&after=" + encodeURIComponent(cursor) : "");
  const { body } = await api(topicPath("/dead" + query));
  state.deadShown = cursor;
  state.deadCursor = body.next || null;
  $("#dead-next").disabled = !state.deadCursor;
  const rows = (body.items || []).map((j) => {
    const row = document.createElement("tr");
    row.dataset.job = j.id;
    cell(row, j.id);
    cell(row, j.type);
    cell(row, j.attempts + " / " + j.max_attempts);
    cell(row, ago(j.dead_at));
    cell(row, j.last_error || "");
    const actions = row.insertCell();
    const requeue = document.createElement("button");
    requeue.textContent = "Requeue";
    requeue.className = "requeue";
    requeue.addEventListener("click", () => act(topicPath("/dead/" + encodeURIComponent(j.id) + "/requeue"), "POST"));
    const remove = document.createElement("button");
    remove.textContent = "Delete";
    remove.className = "delete";
    remove.addEventListener("click", () => {
      if (confirm("Delete dead job " + j.id + "? It cannot be undone.")) {
        act(topicPath("/dead/" + encodeURIComponent(j.id)), "DELETE");
      }
    });
    if (may("admin")) actions.append(requeue, " ", remove);
    return row;
  });
  $("#dead tbody").replaceChildren(...rows);
}

// Buttons for a scheduled job: show it, fire it now, cancel it.
function jobActions(j) {
  const button = (text, cls, onClick) => {
    const b = document.createElement("button");
    b.textContent = text;
    b.className = cls;
    b.addEventListener("click", (ev) => { ev.stopPropagation(); onClick(); });
    return b;
  };
  const path = topicPath("/jobs/" + encodeURIComponent(j.id));
  const out = [
    button("Show", "show-job", () => lookup(j.id)),
    " ",
    button("Fire now", "fire-now", () => jobAct(path + "/reset", "POST", { delay_ms: 0 })),
    " ",
    button("Reset…", "reset-job", () => {
      const text = prompt("Fire " + j.id + " in (90s, 30m, 2h, 1d) or at (an RFC 3339 instant):", "30m");
      const body = text && when(text.trim());
      if (body) jobAct(path + "/reset", "POST", body);
      else if (text) showError("Not a span (90s, 30m, 2h, 1d) nor an instant: " + text);
    }),
    " ",
    button("Cancel", "cancel-job", () => {
      if (confirm("Cancel job " + j.id + "?")) jobAct(path, "DELETE");
    }),
  ];
  // A series fires once now as a job of its own, its schedule untouched.
  if (j.repeat) out.push(" ", button("Trigger", "trigger-job", () => jobAct(path + "/trigger", "POST")));
  return out;
}

// A reset's body from a span (90s, 30m, 2h, 1d) or an RFC 3339 instant; null for neither.
function when(text) {
  const m = text.match(/^(\d+)(ms|s|m|h|d)$/);
  if (m) {
    const unit = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000 }[m[2]];
    return { delay_ms: Number(m[1]) * unit };
  }
  const at = Date.parse(text);
  return /^\d{4}-\d\d-\d\dT/.test(text) && !Number.isNaN(at) ? { fire_at: at } : null;
}

async function jobAct(path, method, body) {
  try {
    await api(path, body === undefined ? { method } : { method, body: JSON.stringify(body) });
    await Promise.all([showLists(), refreshTopics()]);
    showError(null);
  } catch (err) {
    handle(err);
  }
}

// Shows job `id` of the selected topic as fields, and puts it in the address.
async function lookup(id) {
  $("#lookup-id").value = id;
  showPath(topicUrl(state.topic, "/jobs/" + encodeURIComponent(id)));
  try {
    const res = await api(topicPath("/jobs/" + encodeURIComponent(id)));
    if (res.status === 404) {
      const row = document.createElement("tr");
      cell(row, "No job " + id + " in " + state.topic + " (it fired and finished, or was cancelled: see its events).");
      $("#lookup-result tbody").replaceChildren(row);
    } else {
      showJob(res.body);
    }
  } catch (err) {
    handle(err);
  }
}

async function act(path, method) {
  try {
    await api(path, { method });
    await Promise.all([showDead(state.deadShown), refreshTopics()]);
    showError(null);
  } catch (err) {
    handle(err);
  }
}

async function tailEvents() {
  if (!state.topic) return;
  for (let page = 0; page < 20; page++) {
    const query = "?limit=100" + (state.eventsAfter ? "&after=" + encodeURIComponent(state.eventsAfter) : "");
    const { body } = await api(topicPath("/events" + query));
    const items = body.items || [];
    if (!items.length) break;
    const tbody = $("#events tbody");
    for (const e of items) {
      const row = tbody.insertRow(0);
      cell(row, e.id);
      cell(row, e.job_id);
      cell(row, e.event);
      cell(row, e.attempt);
      cell(row, new Date(e.fired_at).toISOString());
      cell(row, e.data === null ? "" : JSON.stringify(e.data));
    }
    while (tbody.rows.length > 100) tbody.deleteRow(tbody.rows.length - 1);
    state.eventsAfter = items[items.length - 1].id;
    if (!body.next) break;
  }
}

async function selectTopic(name, path) {
  showPath(path || topicUrl(name));
  state.topic = name;
  state.eventsAfter = null;
  $("#topic-name").textContent = name;
  $("#topic-view").hidden = false;
  $("#events tbody").replaceChildren();
  $("#topic-slots tbody").replaceChildren();
  $("#lookup-result tbody").replaceChildren();
  $("#dead-requeue-all").hidden = !may("admin");
  $("#dead-delete-all").hidden = !may("admin");
  state.lists.upcoming = { shown: null, next: null };
  state.lists.running = { shown: null, next: null };
  for (const row of document.querySelectorAll("#topics tbody tr")) {
    row.classList.toggle("selected", row.dataset.topic === name);
  }
  try {
    await Promise.all([showDead(null), tailEvents(), showLists(), refreshSlots(), refreshHistory()]);
  } catch (err) {
    handle(err);
  }
}

function handle(err) {
  if (err instanceof Unauthorized) {
    lock(true);
  } else {
    showError(err);
    $("#status").textContent = "error";
  }
}

let timer = null;
async function refresh() {
  clearTimeout(timer);
  try {
    const me = await api("/v1/token");
    state.scope = me.body.scope || "admin";
    await refreshMetrics();
    await Promise.all([refreshTopics(), refreshSlots()]);
    if (state.topic) await Promise.all([showDead(state.deadShown), tailEvents(), showLists()]);
    lock(false);
    showError(null);
    $("#status").textContent = "updated " + new Date().toISOString().slice(11, 19) + "Z" +
      (may("admin") ? "" : " (a " + state.scope + " token: changes it may not make are hidden)");
  } catch (err) {
    handle(err);
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

$("#token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const token = $("#token").value.trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  refresh();
});

$("#lookup").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const id = $("#lookup-id").value.trim();
  if (id && state.topic) lookup(id);
});

// The view the address names, at load and on the browser's back and forward.
async function openPath() {
  const view = viewOfPath();
  if (!view) return;
  await selectTopic(view.topic, location.pathname);
  if (view.job) await lookup(view.job);
  if (view.dead) $("#dead").scrollIntoView();
}
window.addEventListener("popstate", () => { openPath(); });

for (const which of ["upcoming", "running"]) {
  $("#" + which + "-first").addEventListener("click", () => showList(which, null).catch(handle));
  $("#" + which + "-next").addEventListener("click", () => showList(which, state.lists[which].next).catch(handle));
}
$("#dead-first").addEventListener("click", () => showDead(null).catch(handle));
$("#list-filter").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.lists.upcoming = { shown: null, next: null };
  state.lists.running = { shown: null, next: null };
  showLists().catch(handle);
});
// Every dead letter of the topic, or those of the label given, requeued or deleted at once:
// each letter dead by now, once (one that dies again meanwhile waits for the next click).
async function bulkDead(verb, rest, method, warning) {
  const label = $("#dead-label").value.trim();
  const what = label ? "every dead letter labelled " + label : "every dead letter";
  if (!state.topic || !confirm(verb + " " + what + " of " + state.topic + "?" + warning)) return;
  const filter = label ? "label=" + encodeURIComponent(label) : "from=0";
  try {
    await api(topicPath(rest + "?" + filter), { method });
    await Promise.all([showDead(null), refreshTopics()]);
    showError(null);
  } catch (err) {
    handle(err);
  }
}
$("#dead-delete-all").addEventListener("click", () => bulkDead("Delete", "/dead", "DELETE", " It cannot be undone."));
$("#dead-requeue-all").addEventListener("click", () => bulkDead("Requeue", "/dead/requeue", "POST", ""));
$("#dead-next").addEventListener("click", () => showDead(state.deadCursor).catch(handle));

$("#token").value = sessionStorage.getItem(TOKEN_KEY) || "";
refresh().then(openPath);
