"""Indexes on the event table for the investigation pages, each named for the question it serves.

The event table belongs to the ingest app (declared in SQL, ingest migration 0002); these are
created on the partitioned parent, so every monthly partition, present and future, has them.
Full indexes tax ingestion, so there is one (GIN on tables: +8% COPY time, docs/benchmarks.md);
the others are partial and hold only the few rows they serve.
"""

from django.db import migrations

FORWARD = """
-- "Everything that touched shop.orders" (the explorer's and API's `table` filter, the table page):
-- tables @> '{shop.orders}'. With a time range, PostgreSQL ANDs it with the time index's bitmap.
CREATE INDEX IF NOT EXISTS event_tables ON ingest_event USING gin (tables);
-- The dashboard's anti-forensic events (logging switched off...), newest first.
CREATE INDEX IF NOT EXISTS event_anti_forensic_time ON ingest_event (occurred_at DESC)
    WHERE flags @> '{anti_forensic}'::varchar(40)[];  -- typed as Django's filter is, or it is not used
-- Following a table under its later names (query.renamed_to): renames in time order.
CREATE INDEX IF NOT EXISTS event_renames_time ON ingest_event (occurred_at)
    WHERE destructive AND statement_type IN ('RENAME TABLE', 'ALTER TABLE');
"""
BACKWARD = """
DROP INDEX IF EXISTS event_tables;
DROP INDEX IF EXISTS event_anti_forensic_time;
DROP INDEX IF EXISTS event_renames_time;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("investigations", "0002_tables_seen"),
        ("ingest", "0009_source_polling_file_checkpoints"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
