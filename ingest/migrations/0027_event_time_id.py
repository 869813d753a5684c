"""A b-tree on the event rows' (occurred_at, id): the pages' walks in time order (issue 22, item 5).

The explorer's newest first (`ORDER BY occurred_at DESC, id DESC`), oldest first, the API's
listing, the time bounds of the chart and the table history's pages walk an index on time and
stop after a page. Until now that walk used the unique `(occurred_at, record_hash)` index, which
exactly once no longer needs (branch once22 drops it). Without any b-tree on time, each of
those reads all the rows: EXPLAIN ANALYZE at 10 million events, 4.3 s for the newest page (a
parallel sequential scan and a top-N sort) against 0.07 ms with this index, which gives the
pages' order itself (no incremental sort on id) and is smaller than the unique one (300 MB
against 472 MB there); docs/benchmarks.md has what it costs a COPY.
"""

from __future__ import annotations

from django.db import migrations

FORWARD = "CREATE INDEX event_time_id ON ingest_event_row (occurred_at, id);"
BACKWARD = "DROP INDEX event_time_id;"


class Migration(migrations.Migration):
    dependencies = [("ingest", "0026_narrow_event_row")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
