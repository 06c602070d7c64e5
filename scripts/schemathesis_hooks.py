"""schemathesis hooks for scripts/schemathesis.sh: how to make a body of a media type that
schemathesis does not know. An import's body is lines of a topic's export (JSON Lines,
application/x-ndjson); its schema, a string, cannot say which lines are an export's, so the
lines made here are ones every import reads (a topic's `end` lines, which the service
skips): the checks then reach what the schema does describe, the path and the query (a
topic that does not exist is 404, another slot count 409). What a line that is not an
export's is answered (400 naming its number) is tested in tests/transfer.rs."""

import json

import schemathesis
from hypothesis import strategies as st

_end = st.builds(
    lambda topic, jobs: {"kind": "end", "topic": topic, "jobs": jobs},
    st.from_regex(r"[A-Za-z0-9_.-]{1,16}", fullmatch=True),
    st.integers(0, 10_000),
)
_lines = st.lists(_end, max_size=3).map(
    lambda lines: "".join(json.dumps(line) + "\n" for line in lines).encode()
)

schemathesis.openapi.media_type("application/x-ndjson", _lines)
