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
};

class Unauthorized extends Error {}

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

function ago(ms) {
  if (ms === null || ms === undefined) return "never";
  const d = Date.now() - ms;
  if (Math.abs(d) < 1000) return d >= 0 ? "just now" : "in <1 s";
  const s = Math.round(Math.abs(d) / 1000);
  const text = s < 120 ? s + " s" : s < 7200 ? Math.round(s / 60) + " min" : Math.round(s / 3600) + " h";
  return d >= 0 ? text + " ago" : "in " + text;
}

function showError(err) {
  const box = $("#error");
  if (!err) { box.hidden = true; return; }
  box.textContent = String(err.message || err);
  box.hidden = false;
}

function lock(locked) {
  state.locked = locked;
  $("#auth-needed").hidden = !locked;
  $("#views").hidden = locked;
  if (locked) {
    for (const id of ["#topics", "#slots", "#dead", "#events"]) $(id + " tbody").replaceChildren();
    $("#lateness").replaceChildren();
    $("#status").textContent = "token needed";
  }
}

// Prometheus text: counter values and histogram buckets, summed over topics.
function parseMetrics(text) {
  const fired = new Map();
  const buckets = new Map();
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || !line.trim()) continue;
    const m = line.match(/^(\w+)\{([^}]*)\}\s+(\S+)$/);
    if (!m) continue;
    const labels = Object.fromEntries([...m[2].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    const value = Number(m[3]);
    if (m[1].endsWith("jobs_fired_total")) fired.set(labels.topic, value);
    if (m[1].endsWith("firing_lateness_seconds_bucket")) {
      buckets.set(labels.le, (buckets.get(labels.le) || 0) + value);
    }
  }
  return { fired, buckets };
}

function drawLateness(buckets) {
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
  $("#lateness-note").textContent = total
    ? total + " jobs fired since the service started, by how late they fired (all topics)."
    : "No job has fired yet.";
}

async function refreshMetrics() {
  const res = await api("/metrics");
  if (res.status !== 200) return;
  const { fired, buckets } = parseMetrics(res.body);
  const now = Date.now();
  for (const [topic, count] of fired) {
    const before = state.fired.get(topic);
    if (before && now > before[1]) state.rates.set(topic, ((count - before[0]) * 1000) / (now - before[1]));
    state.fired.set(topic, [count, now]);
  }
  drawLateness(buckets);
}

async function refreshTopics() {
  const { body } = await api("/v1/topics");
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
    row.addEventListener("click", () => selectTopic(t.name));
    return row;
  });
  $("#topics tbody").replaceChildren(...rows);
}

async function refreshSlots() {
  const res = await api("/health");
  const slots = (res.body && res.body.slots) || [];
  const rows = slots.map((s) => {
    const row = document.createElement("tr");
    cell(row, s.topic);
    cell(row, s.slot);
    cell(row, s.alive ? "yes" : "NO", s.alive ? "" : "bad");
    cell(row, s.in_flight);
    cell(row, ago(s.last_pump));
    cell(row, s.restarts, s.restarts > 0 ? "bad" : "");
    cell(row, s.last_error || "");
    return row;
  });
  $("#slots tbody").replaceChildren(...rows);
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
    actions.append(requeue, " ", remove);
    return row;
  });
  $("#dead tbody").replaceChildren(...rows);
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

async function selectTopic(name) {
  state.topic = name;
  state.eventsAfter = null;
  $("#topic-name").textContent = name;
  $("#topic-view").hidden = false;
  $("#events tbody").replaceChildren();
  $("#lookup-result").textContent = "";
  for (const row of document.querySelectorAll("#topics tbody tr")) {
    row.classList.toggle("selected", row.dataset.topic === name);
  }
  try {
    await Promise.all([showDead(null), tailEvents()]);
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
    await refreshMetrics();
    await Promise.all([refreshTopics(), refreshSlots()]);
    if (state.topic) await Promise.all([showDead(state.deadShown), tailEvents()]);
    lock(false);
    showError(null);
    $("#status").textContent = "updated " + new Date().toLocaleTimeString();
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

$("#lookup").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const id = $("#lookup-id").value.trim();
  if (!id || !state.topic) return;
  try {
    const res = await api(topicPath("/jobs/" + encodeURIComponent(id)));
    $("#lookup-result").textContent = res.status === 404
      ? "No job " + id + " in " + state.topic + "."
      : JSON.stringify(res.body, null, 2);
  } catch (err) {
    handle(err);
  }
});

$("#dead-first").addEventListener("click", () => showDead(null).catch(handle));
$("#dead-next").addEventListener("click", () => showDead(state.deadCursor).catch(handle));

$("#token").value = sessionStorage.getItem(TOKEN_KEY) || "";
refresh();
