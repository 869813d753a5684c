"""Exactly once by checkpoint and content, without the unique index on every event (issue 22).

The unique index `event_record_once` on `ingest_event_row (occurred_at, record_hash)` cost
PostgreSQL about a fifth of its CPU per stored row. What it guaranteed is now kept by each read's
checkpoint, committed with its rows, and by recognising a file's content under any name
(`ingest.identity`): `SourceFile.content_head` and `stored_below`. What it served besides:

- the alerts feed found each alert's event by `(event_time, event_hash)`: alerts now name the
  event's id (`Alert.event_id`, filled here for the alerts there are, through the index, before
  it goes);
- flag corrections find their events by time and record hash, through a btree on
  `(occurred_at, id)` that replaces it;
- the explorer's listings newest (or oldest) first walked it in time order: that btree
  (`event_time_order`) does that too, and gives the pages' order (time, then id) itself, with a
  key of 16 bytes instead of 25 and no uniqueness to check (without any such index an
  unfiltered listing sorted every row: 8 to 12 s instead of milliseconds at 2 million events;
  4.3 s instead of 0.07 ms for the newest page at 10 million, docs/benchmarks.md).

Backward: the unique index is made again (which fails, saying which key, if the store holds the
same record twice: exactly once was broken, and the index cannot be restored over it), and the
two columns go.
"""

from __future__ import annotations

from django.db import migrations, models

FORWARD = """
UPDATE ingest_alert a SET event_id = e.id FROM ingest_event_row e
WHERE a.event_hash IS NOT NULL AND e.record_hash = a.event_hash
  AND e.occurred_at IS NOT DISTINCT FROM a.event_time;
-- The explorer's time order (and the lookups of an event by time and hash).
CREATE INDEX event_time_order ON ingest_event_row (occurred_at, id);
DROP INDEX event_record_once;
-- A followed file's first KiB named it already (head_length 1024: the same bytes hashed).
UPDATE ingest_sourcefile SET content_head = head_sha256 WHERE head_length = 1024;
-- What followed files and files read to their end hold already.
UPDATE ingest_sourcefile SET stored_below = CASE
    WHEN finished AND bytes_read > 0 THEN bytes_read
    ELSE COALESCE((resume ->> 'offset')::bigint, 0) END;
"""

BACKWARD = """
CREATE UNIQUE INDEX event_record_once ON ingest_event_row (occurred_at, record_hash) NULLS NOT DISTINCT;
DROP INDEX event_time_order;
"""


class Migration(migrations.Migration):
    dependencies = [("ingest", "0026_narrow_event_row")]

    operations = [
        migrations.AddField(
            model_name="alert",
            name="event_id",
            field=models.BigIntegerField(null=True),
        ),
        migrations.AddField(
            model_name="sourcefile",
            name="content_head",
            field=models.CharField(blank=True, db_default="", max_length=64),
        ),
        migrations.AddField(
            model_name="sourcefile",
            name="stored_below",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddIndex(
            model_name="sourcefile",
            index=models.Index(fields=["content_head"], name="sourcefile_content_head"),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
