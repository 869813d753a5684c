"""Issue 22: a log's bytes in zstd chunks (RawChunk) and custody links of version 2.

The event table's `raw` column stays (as the field `raw_inline`) but may be NULL: an event whose raw
bytes are a slice of its file's content keeps only their length (`raw_length`). Migration 0024
moves the raw bytes of events stored before into chunks.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0022_binlog_statement_time_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE ingest_event ALTER COLUMN raw DROP NOT NULL,"
                    " ADD COLUMN raw_length integer NULL",
                    "ALTER TABLE ingest_event DROP COLUMN raw_length, ALTER COLUMN raw SET NOT NULL",
                ),
            ],
            state_operations=[
                migrations.RemoveField(model_name="event", name="raw"),
                migrations.AddField(
                    model_name="event",
                    name="raw_inline",
                    field=models.BinaryField(db_column="raw", null=True),
                ),
                migrations.AddField(
                    model_name="event",
                    name="raw_length",
                    field=models.IntegerField(null=True),
                ),
            ],
        ),
        migrations.AddField(
            model_name="custodylink",
            name="chunks",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="custodylink",
            name="rows_sha256",
            field=models.BinaryField(editable=False, null=True),
        ),
        migrations.AddField(
            model_name="custodylink",
            name="version",
            field=models.SmallIntegerField(db_default=1, default=1),
        ),
        migrations.CreateModel(
            name="RawChunk",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("start", models.BigIntegerField()),
                ("length", models.IntegerField()),
                ("sha256", models.BinaryField(max_length=32)),
                ("data", models.BinaryField()),
                (
                    "source_file",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="raw_chunks",
                        to="ingest.sourcefile",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("source_file", "start"), name="raw_chunk_once")
                ],
            },
        ),
    ]
