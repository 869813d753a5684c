"""A SQL function that sorts an event's flags, for the ECS export's `tags`.

Written inline as `ARRAY(SELECT ... ORDER BY ...)`, the sort is a correlated subquery, which
PostgreSQL never runs in a parallel worker: the whole export then ran in one process. A function
declared PARALLEL SAFE (it is: it reads nothing but its argument) keeps the export parallel.
"""

from __future__ import annotations

from django.db import migrations

CREATE = """
CREATE FUNCTION auditweb_sorted_flags(flags varchar[]) RETURNS varchar[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT COALESCE(array_agg(f ORDER BY f COLLATE "C"), '{}') FROM unnest(flags) AS f $$
"""
DROP = "DROP FUNCTION auditweb_sorted_flags(varchar[])"


class Migration(migrations.Migration):
    dependencies = [("investigations", "0008_apitoken_siem")]

    operations = [migrations.RunSQL(CREATE, DROP)]
