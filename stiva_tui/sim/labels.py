"""What answered a bench or a session, in the words every table, report, plot and screen uses.

Three kinds of pool, one word each:

- **simulated** (`--pool sim`): `sim:` models whose strengths are set by their profiles, no real
  language model: "simulated pool", or "simulated pool (seed 3)";
- **recorded** (`--pool replay:ID`, and the bench `stiva bench import` makes): real models' answers
  recorded earlier and served again as they were: "recorded pool (bench 3f2a9c)", or "recorded pool
  (bench 3f2a9c: ZeroEval ...)" where the answers came from outside Stiva;
- **live**: the configured pool's real models, answering now; no label (None).

`pool_kind(label)` tells them apart, `loud(label)` is the label as a heading says it (the kind in
capitals, the bench id as it is). Nothing here imports anything.
"""

from __future__ import annotations

from typing import Literal

SIM_LABEL = "simulated pool"
RECORDED_LABEL = "recorded pool"
# A recorded pool's models are `replay:MODEL` (`direct:replay:openai/gpt-4o` in a bench).
REPLAY_PREFIX = "replay:"

PoolKind = Literal["simulated", "recorded", "live"]


def pool_kind(label: str | None) -> PoolKind:
    """ "simulated", "recorded" or "live" (no label: real models answering now)."""
    if not label:
        return "live"
    if label.startswith(RECORDED_LABEL):
        return "recorded"
    return "simulated"


def loud(label: str) -> str:
    """ "RECORDED POOL (bench 3f2a9c: ZeroEval)": the kind in capitals, what follows as it is (an
    id in capitals is another id)."""
    kind, sep, rest = label.partition(" (")
    return kind.upper() + sep + rest


def pool_notice(label: str | None) -> tuple[str, str] | None:
    """What a report says first about where its figures come from, as (heading, sentence):
    ("SIMULATED POOL", "every figure here comes from simulated models ..."); None for a live pool."""
    kind = pool_kind(label)
    if kind == "live" or label is None:
        return None
    if kind == "recorded":
        return loud(label), (
            "every answer here is a real model's answer, recorded earlier and served again as it was: "
            "a step that read other steps' drafts got the same answer as without them."
        )
    return loud(label), (
        "every figure here comes from simulated models whose strengths are set by their profiles, "
        "not from real language models."
    )
