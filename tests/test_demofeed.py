"""The demo's live server writes a general log AuditWeb reads as one server going on: the sample's
records, every one attributed as recorded, with no gap, restart or reused connection id."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from devtools.demofeed import feed as demo_feed
from devtools.demofeed import highest_id, read_sample, rounds
from tests.conftest import FIXTURES

SLAP = FIXTURES / "genlog" / "mariadb-10.11.19-slap.log"


def test_it_replays_the_load_clients_whole_and_nothing_of_the_recordings_setup() -> None:
    banner, records = read_sample(SLAP)
    assert banner[0].startswith(b"/usr/sbin/mariadbd, Version: 10.11.19")
    clients = {r.connection_id for r in records}
    assert len(clients) == 5
    commands = Counter(r.rest.split(b"\t")[0] for r in records)
    assert commands[b"Connect"] == commands[b"Quit"] == 5
    assert all(r.rest.startswith((b"Connect", b"Quit", b"Query\tSELECT", b"Query\tINSERT")) for r in records)
    # Every line those connections wrote in the sample is in their records, whole.
    written = b"".join(r.rest for r in records)
    for client in clients:
        mark = f"{client:6d} ".encode()
        mine = [line for line in SLAP.read_bytes().splitlines(keepends=True) if b"\t" + mark in line]
        assert len(mine) > 2 and all(line.split(mark, 1)[1] in written for line in mine)


def test_each_round_numbers_its_connections_above_the_last() -> None:
    _, records = read_sample(SLAP)
    replayed = rounds(records)
    first = [next(replayed) for _ in records]
    second = [next(replayed) for _ in records]
    assert max(r.connection_id for r in first) < min(r.connection_id for r in second)
    assert [r.rest for r in first] == [r.rest for r in second]


def test_a_feed_started_again_goes_on_numbering_above_what_the_file_holds(tmp_path) -> None:
    _, records = read_sample(SLAP)
    target = tmp_path / "general.log"
    demo_feed(SLAP, target, per_tick=len(records) + 3, tick=0, ticks=1)
    before = highest_id(target)
    assert before > max(r.connection_id for r in records)
    demo_feed(SLAP, target, per_tick=3, tick=0, ticks=1)
    assert highest_id(target) > before
    text = target.read_bytes()
    assert text.count(b"/usr/sbin/mariadbd, Version") == 1  # one banner: the same log going on
    assert highest_id(tmp_path / "none.log") == 0


@pytest.mark.django_db
def test_what_it_writes_is_read_as_one_server_going_on(tmp_path) -> None:
    from ingest.models import Event, Gap, ParseProblem
    from ingest.pipeline import ingest_file, source_for_path

    _, records = read_sample(SLAP)
    target = tmp_path / "live" / "general.log"
    before = datetime.now(UTC).replace(microsecond=0)
    # Two rounds and a bit, in ticks a second apart that cross several seconds.
    demo_feed(SLAP, target, per_tick=len(records) // 3 + 1, tick=0.4, ticks=7)
    source = source_for_path(target, server="demo-live", fmt="auto", tz="UTC")
    run = ingest_file(target, source=source)

    events = list(Event.objects.filter(server="demo-live").order_by("id"))
    assert len(events) == run.events_stored > 2 * len(records)
    assert not Gap.objects.filter(server="demo-live").exists()
    assert not ParseProblem.objects.exists()
    assert all(before <= e.occurred_at <= datetime.now(UTC) + timedelta(seconds=1) for e in events)
    # As recorded: the load's account on its statements, the same mix in each round.
    assert [e.command for e in events if e.user is None] == ["Server start"]  # the banner
    assert {e.user for e in events if e.user} == {"root"}
    assert not any(e.destructive or e.flags for e in events if e.user)
    assert Counter(e.statement_type for e in events[: len(records)]) == Counter(
        e.statement_type for e in events[len(records) : 2 * len(records)]
    )
