"""A partial index on the tables of destructive events.

"Who changed or dropped shop.orders?" (the table page, and the explorer's table filter with
"destructive only") reads the few destructive rows of one table over all time. The full GIN
index on tables finds every row naming the table, and each must then be read to learn whether
it was destructive; this one holds the destructive rows only (measured at 10 million events:
the table page from 243 to 35 ms, docs/benchmarks.md), and costs ingestion little, as few rows
enter it.
"""

from django.db import migrations

FORWARD = "CREATE INDEX IF NOT EXISTS event_destructive_tables ON ingest_event USING gin (tables) WHERE destructive;"
BACKWARD = "DROP INDEX IF EXISTS event_destructive_tables;"


class Migration(migrations.Migration):
    dependencies = [("investigations", "0003_event_indexes")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
