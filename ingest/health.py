"""The health of a source, in one place: a pure judgement from what the store knows about it.

After Serf's failure detection (a member is alive, suspect, then dead) with a learned suspicion
timeout, as phi-accrual detectors learn it: a followed source is **alive** while it delivers
about as often as it used to, **suspect** once its silence is well beyond the gaps between its
recent deliveries (mean plus DEVIATIONS standard deviations, never below a floor), and **dead**
once the silence passes its quiet time (the per-source ceiling, `Source.quiet_seconds`). Errors
reading it make it **failed** at once. Sources that are not followed are **finished** (read once
to their end), **failed** (their read failed), **off** (switched off) or **waiting** (not read
yet, like a followed source before its first data).

No Django here: ingest.sources gathers the facts from the database, the pages, the API and the
alerts all use the Verdict it returns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

ALIVE = "alive"
SUSPECT = "suspect"
DEAD = "dead"
FAILED = "failed"
WAITING = "waiting"
FINISHED = "finished"
OFF = "off"
STATES = (ALIVE, SUSPECT, DEAD, FAILED, WAITING, FINISHED, OFF)
# The states someone should look at (the dashboard lists them).
ATTENTION = (SUSPECT, DEAD, FAILED)
# The coarse state the API's `health.state` and the alerts have always used.
LEGACY = {
    ALIVE: "ok",
    SUSPECT: "ok",  # a suspicion is no failure yet: no alert until the source is dead
    FINISHED: "ok",
    DEAD: "unhealthy",
    FAILED: "unhealthy",
    WAITING: "waiting",
    OFF: "off",
}

DEVIATIONS = 4.0  # how far beyond its usual gaps a silence must go to make a source suspect
MIN_GAPS = 3  # fewer gaps between deliveries teach nothing: suspect only at the quiet time
MAX_GAPS = 32  # the recent past is what counts: a source's rhythm changes


def human_duration(seconds: float) -> str:
    """A duration as a person says it: 45 s, 14 min, 2.0 h, 3.5 days."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


@dataclass(frozen=True)
class Expectation:
    """How often a source delivers, and how long a silence makes it suspect, then dead."""

    every: float | None  # the mean gap between its recent deliveries (None: too few to learn from)
    suspect_after: float
    dead_after: float


def learn_expectation(
    deliveries: Sequence[datetime], *, floor: float, ceiling: float, deviations: float = DEVIATIONS
) -> Expectation:
    """The expected gap from the times of recent deliveries (any order), bounded by floor and ceiling.

    1. The gaps between consecutive deliveries, the newest MAX_GAPS of them.
    2. Suspect after mean + `deviations` standard deviations, at least `floor`, at most `ceiling`.
    3. With fewer than MIN_GAPS gaps nothing is learnt: suspect and dead at the ceiling.
    """
    floor = min(floor, ceiling)
    times = sorted(deliveries)
    gaps = [(b - a).total_seconds() for a, b in pairwise(times)][-MAX_GAPS:]
    if len(gaps) < MIN_GAPS:
        return Expectation(None, ceiling, ceiling)
    mean = sum(gaps) / len(gaps)
    deviation = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps))
    suspect = min(ceiling, max(floor, mean + deviations * deviation))
    return Expectation(mean, suspect, ceiling)


@dataclass(frozen=True)
class Trouble:
    """A reason the source cannot be read: kind (vanished, unreadable, refused, failed) and text."""

    kind: str
    reason: str


@dataclass(frozen=True)
class Facts:
    """What the store knows about one source at `now`."""

    now: datetime
    followed: bool  # polled on a schedule: switched on, and not an upload
    upload: bool
    created_at: datetime
    last_delivery: datetime | None  # when new bytes or rows last came
    deliveries: Sequence[datetime]  # recent delivery times, to learn its rhythm from
    floor: float  # the shortest silence that may make it suspect
    ceiling: float  # its quiet time: the longest silence before it is dead
    troubles: Sequence[Trouble] = ()
    reading: bool = False  # a run is queued or running
    read_to_end: bool = False  # every file it has was read to its end, by a run that ended well
    logging_off: bool = False  # the last thing read was a statement that switched logging off


@dataclass(frozen=True)
class Verdict:
    state: str
    reason: str  # why, in one sentence a person reads on the page
    details: tuple[str, ...] = ()  # each trouble on its own (the alert's and the API's reasons)
    kinds: tuple[str, ...] = ()  # the troubles without figures: an alert is raised when they change
    expectation: Expectation | None = None
    silent_for: float | None = None  # seconds since the last delivery (or since it was made)

    @property
    def legacy(self) -> str:
        return LEGACY[self.state]


def _expected(expectation: Expectation) -> str:
    if expectation.every is not None:
        return f"expected every {human_duration(expectation.every)}"
    return f"expected within {human_duration(expectation.dead_after)}"


def judge(facts: Facts) -> Verdict:
    """The state of a source and why (see the module's docstring)."""
    if not facts.followed:
        return _judge_once(facts)
    expectation = learn_expectation(facts.deliveries, floor=facts.floor, ceiling=facts.ceiling)
    since = facts.last_delivery or facts.created_at
    silent = max(0.0, (facts.now - since).total_seconds())
    details = [t.reason for t in facts.troubles]
    kinds = [t.kind for t in facts.troubles]
    what = "no data" if facts.last_delivery else "no data yet"
    silence = f"{what} for {human_duration(silent)}, {_expected(expectation)}"
    if facts.logging_off:
        silence += ": logging was switched off (see the statement that did it)"
    if silent > expectation.dead_after:
        details.append(silence)
        kinds.append("silent: logging off" if facts.logging_off else "silent")
    if facts.troubles:
        state, reason = FAILED, "; ".join(details)
    elif silent > expectation.dead_after:
        state, reason = DEAD, silence
    elif facts.last_delivery is None:
        state, reason = WAITING, f"no data yet, {_expected(expectation)}"
    elif silent > expectation.suspect_after:
        state = SUSPECT
        reason = f"{silence} (dead after {human_duration(expectation.dead_after)} of silence)"
    else:
        state, reason = ALIVE, f"data {human_duration(silent)} ago, {_expected(expectation)}"
    return Verdict(state, reason, tuple(details), tuple(kinds), expectation, silent)


def _judge_once(facts: Facts) -> Verdict:
    """A source read once (an upload, a file given to `manage.py ingest`) or switched off."""
    failed = [t for t in facts.troubles if t.kind == "failed"]
    if failed:
        reason = "; ".join(t.reason for t in failed)
        return Verdict(FAILED, reason, tuple(t.reason for t in failed), ("failed",))
    if facts.reading:
        return Verdict(WAITING, "being read now" if facts.last_delivery else "queued to be read")
    if facts.read_to_end:
        if facts.upload:
            return Verdict(FINISHED, "read to its end: an upload is read once")
        return Verdict(FINISHED, "read once to its end; not followed (switch it on to have it polled)")
    if facts.upload:
        return Verdict(WAITING, "not read yet")
    return Verdict(OFF, "switched off: not polled, never reported silent")
