"""The health model of sources (ingest.health): pure, so every transition is checked without a
database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from ingest import health
from ingest.health import Facts, Trouble, human_duration, judge, learn_expectation

NOW = datetime(2026, 11, 24, 17, 57, 3, tzinfo=UTC)


def every(seconds: float, count: int, last: datetime = NOW) -> list[datetime]:
    """`count` deliveries `seconds` apart, the newest at `last`."""
    return [last - timedelta(seconds=seconds * i) for i in range(count)]


def followed(**changes: object) -> Facts:
    """A followed source that delivered every 30 s until now (floor 60 s, quiet time 1 h)."""
    facts = Facts(
        now=NOW,
        followed=True,
        upload=False,
        created_at=NOW - timedelta(days=1),
        last_delivery=NOW,
        deliveries=every(30, 20),
        floor=60.0,
        ceiling=3600.0,
    )
    return replace(facts, **changes)


def once(**changes: object) -> Facts:
    """A file given to `manage.py ingest`: switched off, read once."""
    return replace(followed(), **{"followed": False, **changes})


def test_it_learns_the_usual_gap_and_suspects_a_silence_well_beyond_it() -> None:
    learnt = learn_expectation(every(30, 20), floor=60, ceiling=3600)
    assert learnt.every == 30 and learnt.suspect_after == 60 and learnt.dead_after == 3600  # the floor
    irregular = [NOW - timedelta(seconds=s) for s in (0, 100, 300, 400, 600, 700)]  # gaps 100 and 200
    learnt = learn_expectation(irregular, floor=60, ceiling=3600)
    assert round(learnt.every or 0) == 140 and round(learnt.suspect_after) == 140 + 4 * 49
    jumpy = [NOW - timedelta(seconds=s) for s in (0, 300, 2400, 2700, 4800, 5100)]  # mean 1020, sd 882
    assert learn_expectation(jumpy, floor=60, ceiling=3600).suspect_after == 3600  # the ceiling


def test_too_few_deliveries_teach_nothing_and_the_quiet_time_decides() -> None:
    learnt = learn_expectation(every(30, 3), floor=60, ceiling=3600)  # two gaps
    assert (learnt.every, learnt.suspect_after, learnt.dead_after) == (None, 3600, 3600)


def test_a_source_goes_from_alive_to_suspect_to_dead_as_its_silence_grows() -> None:
    states = []
    for silent in (20, 59, 61, 14 * 60, 3599, 3601):
        verdict = judge(followed(now=NOW + timedelta(seconds=silent)))
        states.append(verdict.state)
    assert states == ["alive", "alive", "suspect", "suspect", "suspect", "dead"]
    suspect = judge(followed(now=NOW + timedelta(minutes=14)))
    assert suspect.reason == "no data for 14 min, expected every 30 s (dead after 60 min of silence)"
    assert suspect.legacy == "ok" and suspect.kinds == ()  # a suspicion raises no alert
    dead = judge(followed(now=NOW + timedelta(hours=2)))
    assert dead.reason == "no data for 2.0 h, expected every 30 s"
    assert dead.legacy == "unhealthy" and dead.kinds == ("silent",) and dead.details == (dead.reason,)


def test_a_delivery_makes_a_suspect_source_alive_again() -> None:
    later = NOW + timedelta(minutes=14)
    assert judge(followed(now=later)).state == "suspect"
    back = judge(followed(now=later, last_delivery=later, deliveries=[later, *every(30, 20)]))
    assert back.state == "alive" and back.reason.startswith("data 0 s ago, expected every")


def test_a_new_source_waits_for_its_first_data_then_is_dead_after_its_quiet_time() -> None:
    new = followed(created_at=NOW, last_delivery=None, deliveries=[])
    waiting = judge(replace(new, now=NOW + timedelta(minutes=10)))
    assert waiting.state == "waiting" and waiting.reason == "no data yet, expected within 60 min"
    dead = judge(replace(new, now=NOW + timedelta(minutes=61)))
    assert dead.state == "dead" and dead.reason == "no data yet for 61 min, expected within 60 min"


def test_errors_make_it_failed_at_once_with_every_reason() -> None:
    gone = Trouble("vanished", "the file vanished: nothing matches /var/log/mysql/general.log")
    verdict = judge(followed(troubles=[gone]))
    assert verdict.state == "failed" and verdict.reason == gone.reason and verdict.kinds == ("vanished",)
    both = judge(followed(troubles=[gone], now=NOW + timedelta(hours=2)))
    assert both.state == "failed" and both.kinds == ("vanished", "silent") and len(both.details) == 2


def test_a_silence_after_logging_was_switched_off_says_so() -> None:
    verdict = judge(followed(now=NOW + timedelta(hours=2), logging_off=True))
    assert verdict.state == "dead" and verdict.kinds == ("silent: logging off",)
    assert verdict.reason.endswith("logging was switched off (see the statement that did it)")


def test_sources_read_once_are_finished_failed_waiting_or_off() -> None:
    assert judge(once(read_to_end=True)).state == "finished"
    assert judge(once(read_to_end=True, now=NOW + timedelta(days=30))).state == "finished"  # never silent
    failed = judge(once(troubles=[Trouble("failed", "the last run failed: OSError: disk")]))
    assert failed.state == "failed" and failed.kinds == ("failed",)
    # A vanished file of a source nobody follows is no trouble: it was read.
    assert judge(once(read_to_end=True, troubles=[Trouble("vanished", "gone")])).state == "finished"
    assert judge(once(reading=True, last_delivery=None)).reason == "queued to be read"
    assert judge(once(read_to_end=False)).state == "off"
    upload = dict(upload=True)
    assert judge(once(read_to_end=True, **upload)).state == "finished"
    assert judge(once(read_to_end=False, **upload)).state == "waiting"


def test_every_state_has_a_legacy_state_and_a_place() -> None:
    assert set(health.LEGACY) == set(health.STATES)
    assert set(health.ATTENTION) <= set(health.STATES)


def test_durations_read_as_a_person_says_them() -> None:
    assert [human_duration(s) for s in (0, 45, 119, 120, 840, 7199, 7200, 86400 * 3)] == [
        "0 s",
        "45 s",
        "119 s",
        "2 min",
        "14 min",
        "120 min",
        "2.0 h",
        "3.0 days",
    ]
