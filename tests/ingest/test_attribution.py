"""Attribution provenance in the store, on real MariaDB logs: how each event's account is known,
sessions split at a change of user, and a rotated pair read as one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.models import Event, Gap, Session
from investigations.query.attribution import attribution_proof

pytestmark = pytest.mark.django_db
GENLOG = Path(__file__).resolve().parent.parent / "fixtures" / "genlog" / "mariadb-10.11.19-scenario.log"


def test_a_change_of_user_ends_alices_session_and_starts_bobs(ingest_bytes, api_client) -> None:
    ingest_bytes(GENLOG.read_bytes(), server="demo")
    alice, bob = Session.objects.filter(server="demo", connection_id=103).order_by("started_at", "id")
    assert (alice.user, bob.user) == ("alice", "bob")
    assert bob.previous_id == alice.pk and bob.key == alice.key + "~2"
    update = Event.objects.get(server="demo", connection_id=103, command="Execute", statement_type="UPDATE")
    assert (update.user, update.session_id, update.attribution) == ("alice", alice.pk, "connect")
    change = Event.objects.get(server="demo", connection_id=103, command="Change user")
    # The change itself is the last record of alice's session; bob's begins with it.
    assert (change.user, change.session_id, change.attribution) == ("bob", alice.pk, "record")
    assert (bob.opened_time, bytes(bob.opened_hash)) == (change.occurred_at, bytes(change.record_hash))
    after = Event.objects.filter(session=bob, command="Query")
    assert after.count() == 2 and {e.user for e in after} == {"bob"}
    # The sessions API finds each account's run on the connection.
    found = api_client.get("/api/v1/sessions/", {"user": "alice", "connection_id": 103}).json()["results"]
    assert [s["id"] for s in found] == [alice.pk]
    found = api_client.get("/api/v1/sessions/", {"user": "bob", "connection_id": 103}).json()["results"]
    assert [(s["id"], s["previous"]) for s in found] == [(bob.pk, alice.pk)]


def test_the_event_page_shows_the_login_that_proves_who(ingest_bytes, investigator_client) -> None:
    ingest_bytes(GENLOG.read_bytes(), server="demo")
    update = Event.objects.get(server="demo", connection_id=103, command="Execute", statement_type="UPDATE")
    proof = attribution_proof(update)
    assert proof.opened_by is not None and proof.opened_by.command == "Connect"
    assert proof.opened_by.sql.startswith("alice@127.0.0.1 on shop") and proof.opened_by.line == 54
    html = investigator_client.get(f"/events/{update.pk}/").content.decode()
    assert f'href="/events/{proof.opened_by.pk}/"' in html and "line 54" in html
    detail = investigator_client.get(f"/api/v1/events/{update.pk}/").json()
    assert detail["attribution"] == "connect"
    assert detail["attribution_proof"]["opened_by"]["id"] == proof.opened_by.pk


def test_a_rotated_pair_keeps_the_account_of_a_connection_across_the_banner(tmp_path) -> None:
    import io

    from django.core.management import call_command

    from ingest.management.commands.ingest import Command  # noqa: F401  (the command is what users run)

    # Cut the real log at its second banner as a rotation would (the new file starts with it):
    # the banner here is a real restart, so nothing may carry over.
    data = GENLOG.read_bytes()
    cut = data.index(b"/usr/sbin/mariadbd", 10)
    older, newer = tmp_path / "general.log.1", tmp_path / "general.log"
    older.write_bytes(data[:cut])
    newer.write_bytes(data[cut:])
    call_command("ingest", str(older), str(newer), server="rot", timezone="UTC", stdout=io.StringIO())
    gap = Gap.objects.get(server="rot", reason="restart")
    assert "ids started over" in gap.detail
    # After the restart connection 5 is bob's own login, in the newer file; nothing is inferred.
    deletes = Event.objects.filter(server="rot", connection_id=5, statement_type="DELETE")
    assert deletes.count() == 2 and {(e.user, e.attribution) for e in deletes} == {("bob", "connect")}
    assert not Event.objects.filter(server="rot", attribution="inferred_reopen").exists()


SCENE = Path(__file__).resolve().parent.parent / "fixtures" / "attribution_scene"


def test_an_undecided_reopening_is_inferred_and_the_other_logs_corroborate_it(tmp_path) -> None:
    """The scene's general log, as a layout that prints the time on every record would have it (MySQL
    5.7+ does): then nothing in the general log alone tells the OFF/ON banner from a restart until
    connection 7 logs in. Cut before that, mallory's DELETE after the banner is inferred; the same
    server's server_audit names mallory on connection 5 on both sides of it."""
    import io

    from django.core.management import call_command

    data = (SCENE / "mariadb-10.11.19-general.log.1").read_bytes()
    head, banner_and_after = data.split(b"SET GLOBAL general_log = OFF\n", 1)
    banner = banner_and_after[: banner_and_after.index(b"\t\t     7 Connect")]
    delete = b"261124 20:14:15\t     5 Query\tDELETE FROM orders WHERE id = 3\n"
    general = tmp_path / "general.log"
    general.write_bytes(head + b"SET GLOBAL general_log = OFF\n" + banner + delete)
    out = io.StringIO()
    call_command("ingest", str(SCENE / "mariadb-10.11.19-server_audit.log.1"), server="db", stdout=out)
    call_command("ingest", str(general), server="db", timezone="UTC", stdout=out)
    event = Event.objects.get(
        server="db", source_file__path=str(general), sql="DELETE FROM orders WHERE id = 3"
    )
    assert (event.user, event.attribution) == ("mallory", "inferred_reopen")
    gap = Gap.objects.get(server="db", source_file__path=str(general), reason="log_opened")
    assert "connection 5, open before it, ran a record after it" in gap.detail
    assert "it had switched logging off" in gap.detail
    proof = attribution_proof(event)
    assert proof.evidence == gap
    assert proof.corroboration is not None and proof.corroboration.startswith("corroborated:")
    assert "name mallory@127.0.0.1 on connection 5" in proof.corroboration


def test_a_rotated_pair_read_by_one_command_carries_the_time_and_the_accounts(tmp_path) -> None:
    """logrotate's flush reopens the general log in the same second: the new file's first records
    print no time and belong to connections whose logins are in the older file."""
    import io

    from django.core.management import call_command

    older, newer = SCENE / "mariadb-10.11.19-general.log.1", SCENE / "mariadb-10.11.19-general.log"
    call_command("ingest", str(older), str(newer), server="rot", timezone="UTC", stdout=io.StringIO())
    first = Event.objects.filter(server="rot", source_file__path=str(newer)).exclude(command="Server start")
    flush = first.order_by("line").first()
    assert flush is not None and flush.sql == "flush local slow logs"
    last_older = Event.objects.filter(server="rot", source_file__path=str(older)).order_by("-line").first()
    assert last_older is not None and flush.occurred_at == last_older.occurred_at  # the time went on
    assert (flush.user, flush.attribution) == ("root", "connect_earlier_file")
    assert not Event.objects.filter(server="rot", flags__contains=["time_unknown"]).exists()
    gap = Gap.objects.get(server="rot", source_file__path=str(newer), line=1)
    assert gap.reason == "log_reopened" and "prints no time" in gap.detail
    assert "flushed the logs" in gap.detail


def test_a_statement_run_inside_a_definer_routine_links_to_its_call(tmp_path, api_client) -> None:
    import io

    from django.core.management import call_command

    audit = [SCENE / "mariadb-10.11.19-server_audit.log.1", SCENE / "mariadb-10.11.19-server_audit.log"]
    call_command("ingest", *map(str, audit), server="aud", stdout=io.StringIO())
    body = Event.objects.get(server="aud", command="Query", flags__contains=["in_routine"])
    assert body.sql == "DELETE FROM shop.orders WHERE status = 'cancelled'"
    assert (body.user, body.definer) == ("carol", "dave@localhost")
    proof = attribution_proof(body)
    assert proof.call is not None and proof.call.sql == "CALL purge_cancelled()"
    assert (proof.call.user, proof.call.definer) == ("carol", "dave@localhost")
    detail = api_client.get(f"/api/v1/events/{body.pk}/").json()
    assert detail["attribution_proof"]["call"] == proof.call.pk and detail["definer"] == "dave@localhost"


def test_a_followed_source_keeps_accounts_across_logrotate(tmp_path) -> None:
    """The scene's general log followed as a server writes it: its first part polled as
    general.log, then renamed to general.log.1 by logrotate while the new general.log begins
    (with the flush's banner): the connections open across it keep their accounts."""
    import os

    from ingest.follow import ingest_source
    from ingest.models import Source

    log = tmp_path / "general.log"
    log.write_bytes((SCENE / "mariadb-10.11.19-general.log.1").read_bytes())
    source = Source.objects.create(
        name="followed", kind=Source.Kind.FILE, path=str(log) + "*", server="fol", format="general-log"
    )
    ingest_source(source.pk)
    os.rename(log, tmp_path / "general.log.1")
    log.write_bytes((SCENE / "mariadb-10.11.19-general.log").read_bytes())
    ingest_source(source.pk)
    ingest_source(source.pk)
    delete = Event.objects.get(server="fol", sql="DELETE FROM orders WHERE id = 7")
    assert (delete.user, delete.connection_id, delete.attribution) == ("bob", 7, "connect_earlier_file")
    proof = attribution_proof(delete)
    assert proof.opened_by is not None and proof.opened_by.source_file.path.endswith("general.log")
    assert proof.opened_by.line == 20
    assert Gap.objects.get(server="fol", reason="log_reopened").line == 1
    assert not Event.objects.filter(server="fol", flags__contains=["time_unknown"]).exists()
