"""Binary logs in the store (issue 21): files, transactions, statements with the join's link, their
table changes (row counts and the positions rows are decoded from on demand), and how far the
join has looked at each server's events."""

from __future__ import annotations

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0016_source_format_choices_from_registry"),
    ]

    operations = [
        migrations.CreateModel(
            name="BinlogJoinState",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("server", models.CharField(max_length=200, unique=True)),
                (
                    "events_seen",
                    models.BigIntegerField(default=0, help_text="The highest event id looked at"),
                ),
            ],
        ),
        migrations.CreateModel(
            name="BinlogStatement",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("index", models.IntegerField(help_text="Its place in the transaction (0, 1, ...)")),
                ("time", models.DateTimeField(help_text="When it began, to the second (server clock)")),
                (
                    "text",
                    models.TextField(
                        blank=True, help_text="The annotate rows text; empty when the binlog has none"
                    ),
                ),
                ("has_text", models.BooleanField(default=False)),
                ("text_length", models.IntegerField(default=0)),
                ("thread_id", models.BigIntegerField(null=True)),
                ("rows", models.BigIntegerField(default=0)),
                ("event_id", models.BigIntegerField(null=True)),
                (
                    "confidence",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("", "not joined yet"),
                            ("thread_id", "the binlog names the statement's connection"),
                            ("unique_text_and_time", "the only statement with this text at that moment"),
                            ("ordered_assignment", "the only assignment that keeps each connection's order"),
                            ("ambiguous", "several statements fit equally well"),
                            ("unlinked", "no logged statement explains it"),
                        ],
                        default="",
                        max_length=24,
                    ),
                ),
                ("evidence", models.JSONField(blank=True, default=list)),
                (
                    "candidates",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(), blank=True, default=list, size=None
                    ),
                ),
                ("reason", models.CharField(blank=True, max_length=300)),
            ],
        ),
        migrations.CreateModel(
            name="BinlogFile",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("server", models.CharField(max_length=200)),
                (
                    "name",
                    models.CharField(
                        help_text="File name as the server wrote it (mariadb-bin.000001)", max_length=200
                    ),
                ),
                ("server_version", models.CharField(max_length=100)),
                ("server_id", models.BigIntegerField()),
                ("boot_started_at", models.DateTimeField(null=True)),
                ("first_time", models.DateTimeField(null=True)),
                ("last_time", models.DateTimeField(null=True)),
                (
                    "source_file",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="binlog",
                        to="ingest.sourcefile",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="BinlogChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("table", models.CharField(max_length=400)),
                ("change", models.CharField(max_length=6)),
                ("rows", models.BigIntegerField()),
                ("table_map_position", models.BigIntegerField()),
                (
                    "positions",
                    django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField(), size=None),
                ),
                (
                    "statement",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="changes",
                        to="ingest.binlogstatement",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="BinlogTransaction",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("server", models.CharField(max_length=200)),
                ("file_name", models.CharField(max_length=200)),
                ("start", models.BigIntegerField(help_text="Byte position of its first event")),
                ("end", models.BigIntegerField(help_text="Byte position just after its last event")),
                ("gtid", models.CharField(max_length=100, null=True)),
                ("server_id", models.BigIntegerField()),
                (
                    "thread_id",
                    models.BigIntegerField(help_text="MySQL's BEGIN, MariaDB 11.5+ GTID", null=True),
                ),
                ("commit_time", models.DateTimeField()),
                ("ended_by", models.CharField(max_length=12)),
                ("rows", models.BigIntegerField(default=0)),
                (
                    "file",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="transactions",
                        to="ingest.binlogfile",
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="binlogstatement",
            name="transaction",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="statements",
                to="ingest.binlogtransaction",
            ),
        ),
        migrations.AddIndex(
            model_name="binlogfile",
            index=models.Index(fields=["server", "first_time"], name="binlog_file_span"),
        ),
        migrations.AddIndex(
            model_name="binlogtransaction",
            index=models.Index(fields=["server", "commit_time"], name="binlog_tx_server_time"),
        ),
        migrations.AddConstraint(
            model_name="binlogtransaction",
            constraint=models.UniqueConstraint(
                fields=("server", "file_name", "start", "commit_time"), name="binlog_transaction_once"
            ),
        ),
        migrations.AddIndex(
            model_name="binlogstatement",
            index=models.Index(
                condition=models.Q(("event_id__isnull", False)), fields=["event_id"], name="binlog_stmt_event"
            ),
        ),
        migrations.AddIndex(
            model_name="binlogstatement",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["candidates"], name="binlog_stmt_candidates"
            ),
        ),
        migrations.AddIndex(
            model_name="binlogstatement",
            index=models.Index(
                condition=models.Q(("confidence__in", ["", "ambiguous", "unlinked"])),
                fields=["time"],
                name="binlog_stmt_to_join",
            ),
        ),
        migrations.AddConstraint(
            model_name="binlogstatement",
            constraint=models.UniqueConstraint(fields=("transaction", "index"), name="binlog_statement_once"),
        ),
    ]
