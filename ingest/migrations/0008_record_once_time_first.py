"""The unique index that makes ingestion idempotent, with the time first: (occurred_at, record_hash).

Logs are written in time order, so with the time leading each new row lands at the right-hand
end of the index (the same few pages stay in memory) instead of at a random place, as a hash
leading did. Uniqueness is the same; lookups by hash alone now also give the time
(see EventWriter.apply_corrections). Measured in docs/benchmarks.md ("PostgreSQL's share").
"""

from django.db import migrations, models

FORWARD = """
DROP INDEX event_record_once;
CREATE UNIQUE INDEX event_record_once ON ingest_event (occurred_at, record_hash) NULLS NOT DISTINCT;
"""
BACKWARD = """
DROP INDEX event_record_once;
CREATE UNIQUE INDEX event_record_once ON ingest_event (record_hash, occurred_at) NULLS NOT DISTINCT;
"""


class Migration(migrations.Migration):
    dependencies = [("ingest", "0007_gap_log_opened")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.RemoveConstraint(model_name="event", name="event_record_once"),
                migrations.AddConstraint(
                    model_name="event",
                    constraint=models.UniqueConstraint(
                        fields=("occurred_at", "record_hash"), name="event_record_once"
                    ),
                ),
            ],
        ),
    ]
