// BullMQ running timeout-center's bench scenarios on the same Redis, so `toc bench all` can
// put the peer's figures beside its own. Prints one JSON object on its last line.
//
//   REDIS_URL=redis://127.0.0.1:6379/ JOBS=100000 DEVICES=100000 RESET_SECONDS=10 \
//   RATE=2000 SECONDS=60 BURST=100000 node bench.js
//
// What BullMQ cannot do the same way: `changeDelay` only moves a job that is still delayed;
// a job already running (active) cannot be rescheduled, so a heartbeat that arrives during a
// run is refused (JobNotInState) instead of applied after the run.
'use strict';
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

const env = (k, d) => Number(process.env[k] || d);
const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379/';
const connection = () => new IORedis(url, { maxRetriesPerRequest: null });
const run = `${Date.now() % 100000}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = { notes: [] };

async function usedMemory(c) {
  const info = await c.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

function percentiles(values) {
  values.sort((a, b) => a - b);
  const at = (q) => values[Math.min(values.length - 1, Math.floor(q * values.length))];
  return { jobs: values.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), 'p99.9': at(0.999), max: values[values.length - 1] };
}

async function addAll(queue, n, opts) {
  const jobs = [];
  for (let i = 0; i < n; i += 1000) {
    const chunk = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) chunk.push({ name: 'j', data: opts.data ? opts.data(j) : {}, opts: { delay: opts.delay(j), jobId: `j${j}` } });
    jobs.push(...(await queue.addBulk(chunk)));
  }
  return jobs;
}

async function schedule(n) {
  const c = connection();
  const queue = new Queue(`sched-${run}`, { connection: c });
  const before = await usedMemory(c);
  const t = Date.now();
  await addAll(queue, n, { delay: () => 3600000 });
  out.schedule_per_s = n / ((Date.now() - t) / 1000);
  out.bytes_per_delayed_job = (await usedMemory(c) - before) / n;
  await queue.obliterate({ force: true });
  await queue.close();
}

async function reset(n, secs) {
  const queue = new Queue(`reset-${run}`, { connection: connection() });
  const jobs = await addAll(queue, n, { delay: () => 3600000 });
  let done = 0;
  let next = 0;
  const deadline = Date.now() + secs * 1000;
  const t = Date.now();
  // 64 changeDelay calls in flight, as timeout-center's figures use batches in flight.
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (Date.now() < deadline) {
      const job = jobs[next++ % jobs.length];
      await job.changeDelay(3600000 + (next % 1000));
      done++;
    }
  }));
  out.reset_per_s = done / ((Date.now() - t) / 1000);
  await queue.obliterate({ force: true });
  await queue.close();
}

async function latency(rate, secs) {
  const name = `lat-${run}`;
  const queue = new Queue(name, { connection: connection() });
  const n = rate * secs;
  const late = [];
  const start = Date.now() + 2000 + n / 50;
  const worker = new Worker(name, async (job) => { late.push(Date.now() - job.data.fire_at); }, { connection: connection(), concurrency: 100 });
  await addAll(queue, n, {
    data: (i) => ({ fire_at: start + Math.floor((i * 1000) / rate) }),
    delay: (i) => Math.max(0, start + Math.floor((i * 1000) / rate) - Date.now()),
  });
  const deadline = Date.now() + (secs + 120) * 1000;
  while (late.length < n && Date.now() < deadline) await sleep(50);
  out.latency = { rate, ...percentiles(late) };
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
}

async function burst(n) {
  const name = `burst-${run}`;
  const queue = new Queue(name, { connection: connection() });
  const due = Date.now() + 5000 + n / 10;
  await addAll(queue, n, { delay: () => Math.max(0, due - Date.now()) });
  let done = 0;
  const worker = new Worker(name, async () => { done++; }, { connection: connection(), concurrency: 100 });
  while (Date.now() < due) await sleep(5);
  const t = Date.now();
  const deadline = t + 600000;
  while (done < n && Date.now() < deadline) await sleep(20);
  const seconds = (Date.now() - t) / 1000;
  out.burst = { jobs: n, handled: done, seconds, rate: done / seconds };
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
}

(async () => {
  await schedule(env('JOBS', 100000));
  await reset(env('DEVICES', 100000), env('RESET_SECONDS', 10));
  await latency(env('RATE', 2000), env('SECONDS', 60));
  await burst(env('BURST', 100000));
  out.notes.push('changeDelay only moves a delayed job: a reset of a job that is running is refused (JobNotInState), not applied after the run.');
  out.notes.push('Worker concurrency 100; delayed jobs with jobId; addBulk in chunks of 1,000.');
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
