"""Source.format takes its choices from the parsers' registry (issue 20, step 4).

The choices are a callable (ingest.parsers.format_choices), which a migration stores by
reference: a format added to the registry needs no migration of its own. No data changes."""

from __future__ import annotations

from django.db import migrations, models

import ingest.parsers


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0015_source_passwords_from_auditweb_source_variables"),
    ]

    operations = [
        migrations.AlterField(
            model_name="source",
            name="format",
            field=models.CharField(choices=ingest.parsers.format_choices, default="auto", max_length=20),
        ),
    ]
