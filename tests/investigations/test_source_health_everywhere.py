"""One health for sources, shown the same on the dashboard, the Sources list, each source's page
and the API; "Last data" and "Finished" true after a real ingest."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.template import Context, Template
from django.utils import timezone

from ingest.follow import ingest_source
from ingest.models import IngestRun, Source, SourceFile
from ingest.sources import source_health
from tests.conftest import FIXTURES
from tests.logwriter import GeneralLogWriter

pytestmark = pytest.mark.django_db

CRIME_SCENE_LOG = FIXTURES / "crime_scene" / "mariadb-10.11.19-general.log"


def delivered(source: Source, *, every: int, count: int, last_ago: timedelta) -> None:
    """Runs that read new bytes `every` seconds, the newest `last_ago` before now."""
    newest = timezone.now() - last_ago
    for i in range(count):
        IngestRun.objects.create(
            source=source, status="done", bytes_read=100, finished_at=newest - timedelta(seconds=every * i)
        )
    Source.objects.filter(pk=source.pk).update(last_data_at=newest)


def one_of_each(tmp_path: Path) -> dict[str, Source]:
    """A source in each state of the model, named after it."""
    log = tmp_path / "general.log"
    GeneralLogWriter(log).write(5)
    made = {
        state: Source.objects.create(name=f"{state} source", path=str(log), server=f"db-{state}")
        for state in ("alive", "suspect", "dead", "waiting")
    }
    delivered(made["alive"], every=30, count=10, last_ago=timedelta(seconds=5))
    delivered(made["suspect"], every=30, count=10, last_ago=timedelta(minutes=14))
    delivered(made["dead"], every=30, count=10, last_ago=timedelta(hours=2))
    made["failed"] = Source.objects.create(name="failed source", path=str(tmp_path / "gone.log"), server="x")
    made["off"] = Source.objects.create(
        name="off source", kind="mysql-table", dsn="mysql://reader@db1:3306", server="db1", enabled=False
    )
    call_command("ingest", str(CRIME_SCENE_LOG), server="crime", stdout=open("/dev/null", "w"))  # noqa: SIM115
    made["finished"] = Source.objects.get(server="crime")
    return made


def row_of(page: str, name: str) -> str:
    """The table row of the source named `name` on the Sources page."""
    return next(r for r in page.split("<tr>") if f">{name}</a>" in r)


def shown_state(fragment: str) -> str:
    return re.search(r'class="health health-(\w+)"', fragment).group(1)


def test_the_dashboard_the_sources_pages_and_the_api_say_the_same(
    investigator_client, api_client, tmp_path: Path
) -> None:
    sources = one_of_each(tmp_path)
    judged = {state: source_health(Source.objects.get(pk=s.pk)) for state, s in sources.items()}
    assert {state: h.state for state, h in judged.items()} == {state: state for state in sources}

    listed = investigator_client.get("/sources/").content.decode()
    api = {s["name"]: s for s in api_client.get("/api/v1/sources/").json()}
    for state, source in sources.items():
        assert shown_state(row_of(listed, source.name)) == state
        page = investigator_client.get(f"/sources/{source.pk}/").content.decode()
        health = page.split("<dt>Health</dt>")[1]
        assert shown_state(health) == state
        assert api[source.name]["state"] == state
        assert api[source.name]["health"]["state"] == judged[state].legacy  # as it always was
        if state not in ("alive", "waiting"):  # (their reasons count seconds, which tick on)
            assert html.escape(judged[state].reason) in page
            assert api[source.name]["state_reason"] == judged[state].reason

    dashboard = investigator_client.get("/").content.decode()
    summary = re.search(r'<p class="states">(.*?)</p>', dashboard, re.S).group(1)
    for state in sources:
        assert f'<span class="health health-{state}">1 {state}</span>' in summary
    attention = re.search(r'<ul class="attention">(.*?)</ul>', dashboard, re.S).group(1)
    assert [shown_state(item) for item in attention.split("<li>")[1:]] == ["dead", "failed", "suspect"]
    assert "no data for 14 min, expected every 30 s (dead after 60 min of silence)" in attention
    assert "no data for 2.0 h, expected every 30 s" in attention
    assert f"the file vanished: nothing matches {tmp_path / 'gone.log'}" in attention


def test_a_file_given_to_ingest_has_its_last_data_and_is_finished(investigator_client, api_client) -> None:
    before = timezone.now()
    call_command("ingest", str(CRIME_SCENE_LOG), server="crime", stdout=open("/dev/null", "w"))  # noqa: SIM115
    source = Source.objects.get(server="crime")
    assert source.last_data_at is not None and source.last_data_at >= before
    assert SourceFile.objects.get(source=source).finished
    page = investigator_client.get(f"/sources/{source.pk}/").content.decode()
    last_data = page.split("<dt>Last data</dt><dd>")[1].split("</dd>")[0]
    assert "never" not in last_data
    assert timezone.localtime(source.last_data_at).strftime("%Y-%m-%d %H:%M:%S UTC") in last_data
    assert '<span class="ago">(just now)</span>' in last_data or " ago)</span>" in last_data
    assert "yes: read to its end" in page and "Finished: no" not in page
    listed = api_client.get(f"/api/v1/sources/{source.pk}/").json()
    assert listed["state"] == "finished" and listed["last_data_at"] is not None
    # The same bytes again store nothing: the last data stays when it came.
    call_command("ingest", str(CRIME_SCENE_LOG), server="crime", stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert Source.objects.get(pk=source.pk).last_data_at == source.last_data_at


def test_a_followed_source_polled_once_is_alive(investigator_client, tmp_path: Path) -> None:
    log = tmp_path / "general.log"
    GeneralLogWriter(log).write(50)
    source = Source.objects.create(name="db1 log", path=str(log), server="db1")
    assert source_health(source).state == "waiting"
    ingest_source(source.pk)
    source.refresh_from_db()
    health = source_health(source)
    assert health.state == "alive" and health.last_data_at == source.last_data_at is not None
    page = investigator_client.get(f"/sources/{source.pk}/").content.decode()
    assert "no: followed, it may grow" in page  # the newest file of a followed log is never finished
    assert timezone.localtime(source.last_data_at).strftime("%Y-%m-%d %H:%M:%S UTC") in page


def test_switching_on_a_file_read_once_follows_it(admin_api_client, tmp_path: Path, settings) -> None:
    settings.INGEST_SETTLE_SECONDS = 0  # the last record of a quiet file is stored at once
    log = tmp_path / "general.log"
    writer = GeneralLogWriter(log)
    writer.write(3)
    call_command("ingest", str(log), server="crime", stdout=open("/dev/null", "w"))  # noqa: SIM115
    source = Source.objects.get(server="crime")
    stored = source.runs.get().events_stored
    answer = admin_api_client.patch(f"/api/v1/sources/{source.pk}/", {"enabled": True}, format="json")
    assert answer.status_code == 200 and answer.json()["state"] == "alive"  # it delivered just now
    writer.write(1)
    ingest_source(source.pk)
    assert sum(source.runs.values_list("events_stored", flat=True)) == stored + 1  # only the new line
    assert source_health(Source.objects.get(pk=source.pk)).state == "alive"


def test_times_sizes_and_rates_read_with_their_zone_and_units() -> None:
    when = timezone.now() - timedelta(minutes=3, seconds=5)
    out = Template(
        "{% load auditweb %}{{ t|when }}|{{ 124614|per_second }}|{{ 1234567|human_count:'events' }}|"
        "{{ 1288490189|iec_bytes }}|{{ 512|iec_bytes }}|{{ 42.4|per_second:'rows' }}|{{ 840|duration }}|"
        "{{ none|when:'never' }}"
    ).render(Context({"t": when, "none": None}))
    stamp = timezone.localtime(when).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert out.split("|")[1:] == [
        "121.7 KiB/s",
        "1.2 M events",
        "1.2 GiB",
        "512 B",
        "42 rows/s",
        "14 min",
        '<span class="unknown">never</span>',
    ]
    assert f">{stamp}</time>" in out and '<span class="ago">(3 min ago)</span>' in out
