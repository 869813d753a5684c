"""Issue 22: the raw bytes of events stored before, moved into chunks of their files' content."""

from django.db import migrations


def forwards(apps, schema_editor):
    from ingest.raw_migration import move_inline_raw

    move_inline_raw()


def backwards(apps, schema_editor):
    from ingest.raw_migration import restore_inline_raw

    restore_inline_raw()


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0023_raw_chunks"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
