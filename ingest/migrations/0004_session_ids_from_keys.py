"""Session ids become a hash of the session key (ingest.events.session_id_of), so that events can
be formatted for the store in a process that never asks the database for a session's id.
Existing sessions and the events pointing at them are renumbered."""

from django.apps.registry import Apps as StateApps
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def renumber(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    from ingest.events import session_id_of

    Session = apps.get_model("ingest", "Session")
    with schema_editor.connection.cursor() as cur:
        for old, key in Session.objects.values_list("id", "key"):
            new = session_id_of(key)
            if new != old:
                cur.execute("UPDATE ingest_event SET session_id = %s WHERE session_id = %s", [new, old])
                cur.execute("UPDATE ingest_session SET id = %s WHERE id = %s", [new, old])


class Migration(migrations.Migration):
    dependencies = [("ingest", "0003_source_formats_checkpoint")]

    operations = [migrations.RunPython(renumber, migrations.RunPython.noop)]
