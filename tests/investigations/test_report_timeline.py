"""The report's timeline bins and the PDF's text helpers: pure functions, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from reportlab.pdfbase.pdfmetrics import stringWidth

from investigations.reports.text import break_token, gap_reason, unbreakable_parts
from investigations.reports.timeline import (
    MAX_BINS,
    bin_index,
    bin_start,
    bin_starts,
    choose_bin,
    labels,
    per_unit,
)

T0 = datetime(2026, 11, 23, 12, 48, 32, 120_000, tzinfo=UTC)


def test_events_within_one_second_are_counted_per_100_ms_with_labels_to_the_tenth():
    end = T0 + timedelta(milliseconds=870)
    b = choose_bin(end - T0)
    assert per_unit(b) == "events per 100 ms"
    starts = bin_starts(T0, end, b)
    assert starts[0] == datetime(2026, 11, 23, 12, 48, 32, 100_000, tzinfo=UTC)
    assert len(starts) == 9  # .1 to .9: the bars of .100 to .999
    shown = [s for s in labels(starts, b) if s]
    assert shown[0] == "12:48:32.1"
    assert len(set(shown)) == len(shown) > 1


def test_events_within_a_few_milliseconds_get_millisecond_bars():
    b = choose_bin(timedelta(microseconds=42_000))
    assert per_unit(b) == "events per millisecond"
    starts = bin_starts(T0, T0 + timedelta(microseconds=42_000), b)
    assert len(set(labels(starts, b, most=50))) == len(starts)  # every label printed differs


def test_a_minute_is_counted_per_second():
    b = choose_bin(timedelta(minutes=1))
    assert per_unit(b) == "events per second"
    starts = bin_starts(T0, T0 + timedelta(minutes=1), b)
    assert len(starts) <= MAX_BINS + 1
    shown = [s for s in labels(starts, b) if s]
    assert shown[0] == "12:48:32" and len(set(shown)) == len(shown)


def test_a_week_is_counted_per_six_hours_with_the_day_in_its_labels():
    start = datetime(2026, 5, 4, tzinfo=UTC)
    end = start + timedelta(days=7)
    b = choose_bin(end - start)
    assert per_unit(b) == "events per 6 hours"
    starts = bin_starts(start, end, b)
    assert starts[0] == start and starts[-1] + b.width == end  # the window exactly, no extra bar
    shown = [s for s in labels(starts, b) if s]
    assert shown[0] == "05-04 00:00" and len(set(shown)) == len(shown)


@pytest.mark.parametrize(
    ("span", "unit"),
    [
        (timedelta(0), "millisecond"),
        (timedelta(seconds=5), "100 ms"),
        (timedelta(hours=1), "minute"),
        (timedelta(days=1), "hour"),
        (timedelta(days=30), "day"),
        (timedelta(days=3000), "week"),
    ],
)
def test_the_bin_is_the_narrowest_that_keeps_the_chart_within_its_bars(span, unit):
    b = choose_bin(span)
    assert b.unit == unit
    assert span <= b.width * MAX_BINS or unit == "week"


def test_minutes_across_midnight_name_their_day_so_that_labels_differ():
    start = datetime(2026, 5, 4, 23, 0, tzinfo=UTC)
    b = choose_bin(timedelta(minutes=50))  # per minute: "%H:%M"
    starts = [start + i * timedelta(hours=12) for i in range(4)]  # 23:00, 11:00, 23:00, 11:00
    shown = [s for s in labels(starts, b, most=4) if s]
    assert shown == ["05-04 23:00", "05-05 11:00", "05-05 23:00", "05-06 11:00"]


def test_an_event_falls_in_the_bin_that_starts_before_it():
    b = choose_bin(timedelta(seconds=5))
    first = bin_start(T0, b)
    assert bin_index(T0 + timedelta(milliseconds=79), first, b) == 0
    assert bin_index(T0 + timedelta(milliseconds=80), first, b) == 1


def _fits(width: float):
    return lambda piece: stringWidth(piece, "Helvetica", 8) <= width


def test_a_server_label_is_broken_after_a_hyphen_never_inside_a_part():
    pieces = break_token("demo-general-log", _fits(stringWidth("demo-general-lo", "Helvetica", 8)))
    assert pieces == ["demo-general-", "log"]


def test_a_session_key_is_broken_at_its_separators():
    key = "demo-general-log-replica-eu-west-7/before-20260501T030000Z/11"
    pieces = break_token(key, _fits(90))
    assert "".join(pieces) == key
    assert all(p[-1] in "-/" for p in pieces[:-1])
    assert all(stringWidth(p, "Helvetica", 8) <= 90 for p in pieces)


def test_a_part_without_separator_wider_than_the_column_is_cut_where_it_must():
    word = "a" * 200
    pieces = break_token(word, _fits(50))
    assert "".join(pieces) == word and len(pieces) > 1
    assert all(stringWidth(p, "Helvetica", 8) <= 50 for p in pieces)


def test_the_parts_of_a_label_end_at_its_separators():
    assert unbreakable_parts("bob@10.0.0.9 db-1/x") == ["bob@", "10.", "0.", "0.", "9", "db-", "1/", "x"]


def test_a_gap_reason_is_said_once():
    said = gap_reason("logging switched off", "logging switched off by 'SET GLOBAL general_log = OFF'")
    assert said == "logging switched off by 'SET GLOBAL general_log = OFF'"
    restart = gap_reason("server restart", "the server restarted: connection 7 logged in after it")
    assert restart.count("restart") == 1
    assert gap_reason("clock went backwards", "from 12:00:05 to 12:00:01") == (
        "clock went backwards: from 12:00:05 to 12:00:01"
    )
    assert gap_reason("server restart", "") == "server restart"
