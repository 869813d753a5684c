"""Saved searches of one's own (no case) and shared ones.

Reversible: going back deletes the saved searches that belong to no case, which the older
schema cannot hold (a case's saved searches stay)."""

import django.db.models.deletion
from django.apps.registry import Apps as StateApps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def delete_caseless(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    apps.get_model("investigations", "SavedFilter").objects.filter(case__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("investigations", "0009_sorted_flags_function"),
    ]

    operations = [
        migrations.AddField(
            model_name="savedfilter",
            name="shared",
            field=models.BooleanField(default=False, help_text="Listed in everyone's explorer"),
        ),
        migrations.AlterField(
            model_name="savedfilter",
            name="case",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="saved_filters",
                to="investigations.case",
            ),
        ),
        # Runs first when going back, so the column can be NOT NULL again.
        migrations.RunPython(migrations.RunPython.noop, delete_caseless),
    ]
