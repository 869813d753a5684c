"""Issue 21: a row statement keeps its transaction's server, and the join's indexes lead with it,
so a window reads only its server's statements of its seconds (not every server's, filtered after)."""

from django.db import migrations, models

# The statements stored before: their transaction's server, in one set-wise UPDATE.
FILL = """
UPDATE ingest_binlogstatement s SET server = t.server
FROM ingest_binlogtransaction t
WHERE t.id = s.transaction_id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0024_raw_into_chunks"),
    ]

    operations = [
        migrations.AddField(
            model_name="binlogstatement",
            name="server",
            field=models.CharField(default="", max_length=200),
            preserve_default=False,
        ),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
        migrations.RemoveIndex(model_name="binlogstatement", name="binlog_stmt_time"),
        migrations.RemoveIndex(model_name="binlogstatement", name="binlog_stmt_to_join"),
        migrations.AddIndex(
            model_name="binlogstatement",
            index=models.Index(fields=["server", "time"], name="binlog_stmt_server_time"),
        ),
        migrations.AddIndex(
            model_name="binlogstatement",
            index=models.Index(
                condition=models.Q(("confidence__in", ["", "ambiguous", "unlinked"])),
                fields=["server", "time"],
                name="binlog_stmt_server_to_join",
            ),
        ),
    ]
