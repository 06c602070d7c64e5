"""The tour of timeout-center through a Python client generated from its own /openapi.json.

    scripts/client.sh        # generates the client into target/client and runs this on both engines

By hand: generate the client with `openapi-python-client generate --path openapi.json
--meta none --output-path target/client/timeout_center_client`, then
`PYTHONPATH=target/client python3 examples/client_tour.py http://127.0.0.1:8080`.
Every call checks its status and the type of its answer; the first one that fails stops
the tour with a message naming it.
"""

import sys
import time

from timeout_center_client import Client
from timeout_center_client.api.consumers import ack_job, ack_many, bury_job, claim_jobs
from timeout_center_client.api.dead_letters import list_dead, requeue_dead, requeue_dead_many
from timeout_center_client.api.events import list_events
from timeout_center_client.api.flows import delete_flow, get_flow, list_flows, put_flow
from timeout_center_client.api.jobs import (
    cancel_jobs,
    get_job,
    list_jobs,
    put_job,
    reset_job,
    reset_many,
    trigger_job,
)
from timeout_center_client.api.topics import get_topic, list_topics, put_topic
from timeout_center_client.models import (
    AckItem,
    AcksBody,
    BatchBody,
    BatchCreate,
    BatchReset,
    Cancelled,
    ClaimBody,
    Claimed,
    DeadPage,
    Requeued,
    EventPage,
    FlowLimits,
    FlowList,
    FlowView,
    Job,
    JobBody,
    JobPage,
    JobType,
    RepeatBody,
    ResetBody,
    ResetReport,
    TokenBody,
    TopicList,
    TopicSettings,
    TopicView,
)


def ok(what, response, status, kind):
    """The parsed answer of a call that must answer `status` with a `kind`."""
    if response.status_code != status or not isinstance(response.parsed, kind):
        sys.exit(f"{what}: {response.status_code} {response.content!r}")
    return response.parsed


def claim_one(client, topic):
    """Claims one due job of a pull topic, waiting for it."""
    body = ClaimBody(max_=1, wait_ms=5_000)
    claimed = ok("claim", claim_jobs.sync_detailed(topic, client=client, body=body), 200, Claimed)
    if len(claimed.jobs) != 1:
        sys.exit(f"claim: expected one job, got {claimed.jobs}")
    return claimed.jobs[0]


def main(base_url):
    client = Client(base_url=base_url, raise_on_unexpected_status=False)

    # An unpaid order, cancelled in a minute unless pushed back; pushed back.
    job = ok("put_job", put_job.sync_detailed("orders", "o-1", client=client,
             body=JobBody(type_=JobType.EMIT, payload={"order": 1}, delay_ms=60_000)), 201, Job)
    moved = ok("reset_job", reset_job.sync_detailed("orders", "o-1", client=client,
               body=ResetBody(delay_ms=120_000)), 200, Job)
    assert moved.fire_at > job.fire_at, (moved.fire_at, job.fire_at)
    ok("get_job", get_job.sync_detailed("orders", "o-1", client=client), 200, Job)

    # A recurring job: weekdays at 09:00 in Berlin, first at the schedule's next instant.
    standup = ok("put_job", put_job.sync_detailed("reports", "standup", client=client,
                 body=JobBody(repeat=RepeatBody(cron="0 9 * * MON-FRI", tz="Europe/Berlin"))),
                 201, Job)
    assert standup.next_fire_at == standup.fire_at > moved.fire_at, standup
    assert standup.repeat is not None and standup.repeat.to_dict() == {
        "cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin"}, standup.repeat
    # Its next three instants, and one fire now that leaves the series as it is.
    ahead = ok("get_job", get_job.sync_detailed("reports", "standup", client=client, next_=3),
               200, Job)
    assert len(ahead.next_fire_ats) == 3 and ahead.next_fire_ats[0] == standup.fire_at, ahead
    now = ok("trigger_job", trigger_job.sync_detailed("reports", "standup", client=client),
             201, Job)
    assert now.id.startswith("standup~") and now.fire_at < standup.fire_at, now
    # A series of two fires, and a one-off that expires if it cannot fire within a minute.
    twice = ok("put_job", put_job.sync_detailed("reports", "twice", client=client,
               body=JobBody(delay_ms=60_000, repeat=RepeatBody(every_ms=60_000, limit=2))),
               201, Job)
    assert twice.repeat.to_dict() == {"every_ms": 60_000, "limit": 2}, twice.repeat
    late = ok("put_job", put_job.sync_detailed("orders", "o-2", client=client,
              body=JobBody(delay_ms=60_000, expire_after_ms=60_000)), 201, Job)
    assert late.expire_after_ms == 60_000, late

    # Heartbeats, creating the alarm of a device not seen before; one fires at once.
    beats = BatchBody(
        resets=[BatchReset(id="dev-1", delay_ms=0), BatchReset(id="dev-2", delay_ms=60_000)],
        create=BatchCreate(type_=JobType.EMIT, payload={"alarm": True}),
    )
    report = ok("reset_many", reset_many.sync_detailed("devices", client=client, body=beats),
                200, ResetReport)
    assert report.created == 2, report

    # Its event arrives in the topic's stream.
    deadline = time.time() + 10
    while True:
        page = ok("list_events", list_events.sync_detailed("devices", client=client, limit=100),
                  200, EventPage)
        if any(e.job_id == "dev-1" and e.event == "job.fired" for e in page.items):
            break
        if time.time() > deadline:
            sys.exit(f"list_events: dev-1 never fired: {page}")
        time.sleep(0.1)

    # A pull topic: created, read, listed.
    ok("put_topic", put_topic.sync_detailed("work", client=client,
       body=TopicSettings(default_type=JobType.PULL, max_fires_per_s=100)), 201, TopicView)
    topic = ok("get_topic", get_topic.sync_detailed("work", client=client), 200, TopicView)
    assert topic.default_type == "pull" and topic.max_fires_per_s == 100, topic
    topics = ok("list_topics", list_topics.sync_detailed(client=client), 200, TopicList)
    assert any(t.name == "work" for t in topics.items), topics

    # Flow control: every key of a topic limited, one key with its own limits, a job of it.
    ok("put_topic", put_topic.sync_detailed("hooks", client=client,
       body=TopicSettings(flow=FlowLimits(parallelism=5))), 201, TopicView)
    own = ok("put_flow", put_flow.sync_detailed("hooks", "api.example.com:443", client=client,
             body=FlowLimits(rate=100, period_ms=1000)), 201, FlowView)
    assert own.own and own.limits.rate == 100, own
    ok("put_job", put_job.sync_detailed("hooks", "h-1", client=client,
       body=JobBody(delay_ms=600_000, flow_key="api.example.com:443")), 201, Job)
    flows = ok("list_flows", list_flows.sync_detailed("hooks", client=client), 200, FlowList)
    assert [f.key for f in flows.items] == ["api.example.com:443"], flows
    assert flows.default.parallelism == 5, flows
    other = ok("get_flow", get_flow.sync_detailed("hooks", "other.example.com:443", client=client),
               200, FlowView)
    assert not other.own and other.limits.parallelism == 5, other
    gone = delete_flow.sync_detailed("hooks", "api.example.com:443", client=client)
    if gone.status_code != 204:
        sys.exit(f"delete_flow: {gone.status_code} {gone.content!r}")

    # Labels: two jobs of a campaign listed by it and cancelled together; another stays.
    for k in range(2):
        ok("put_job", put_job.sync_detailed("hooks", f"spring-{k}", client=client,
           body=JobBody.from_dict({"delay_ms": 600_000, "labels": {"campaign": "spring"}})),
           201, Job)
    page = ok("list_jobs", list_jobs.sync_detailed("hooks", client=client, label="campaign:spring"),
              200, JobPage)
    assert [j.id for j in page.items] == ["spring-0", "spring-1"], page
    gone = ok("cancel_jobs", cancel_jobs.sync_detailed("hooks", client=client, label="campaign:spring"),
              200, Cancelled)
    assert gone.cancelled == 2, gone
    assert get_job.sync_detailed("hooks", "h-1", client=client).status_code == 200

    # Claim and ack; claim and bury (a dead letter), requeue it, claim and ack it in a batch.
    for k in range(2):
        ok("put_job", put_job.sync_detailed("work", f"w-{k}", client=client,
           body=JobBody(payload={"n": k}, delay_ms=0)), 201, Job)
    first = claim_one(client, "work")
    done = ack_job.sync_detailed("work", first.id, client=client, body=TokenBody(token=first.token))
    if done.status_code != 204:
        sys.exit(f"ack_job: {done.status_code} {done.content!r}")
    second = claim_one(client, "work")
    buried = bury_job.sync_detailed("work", second.id, client=client,
                                    body=TokenBody(token=second.token, error="cannot parse"))
    if buried.status_code != 204:
        sys.exit(f"bury_job: {buried.status_code} {buried.content!r}")
    dead = ok("list_dead", list_dead.sync_detailed("work", client=client), 200, DeadPage)
    assert [j.id for j in dead.items] == [second.id], dead
    ok("requeue_dead", requeue_dead.sync_detailed("work", second.id, client=client), 200, Job)
    # No dead letter of this label is left: a bulk requeue takes none.
    none = ok("requeue_dead_many", requeue_dead_many.sync_detailed("work", client=client,
              label="customer:nobody"), 200, Requeued)
    assert none.requeued == 0, none
    again = claim_one(client, "work")
    assert again.id == second.id, again
    acks = ack_many.sync_detailed("work", client=client,
                                  body=AcksBody(acks=[AckItem(id=again.id, token=again.token)]))
    if acks.status_code != 200 or acks.parsed.results != ["done"]:
        sys.exit(f"ack_many: {acks.status_code} {acks.content!r}")
    print(f"client tour: every call answered as documented ({base_url})")


if __name__ == "__main__":
    main(sys.argv[1])
