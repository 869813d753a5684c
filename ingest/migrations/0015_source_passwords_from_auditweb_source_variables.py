"""Sources read their password only from variables named AUDITWEB_SOURCE_... (issue 18, item 7).

The old default, AUDITWEB_MYSQL_PASSWORD, becomes AUDITWEB_SOURCE_MYSQL_PASSWORD (the worker still
reads the old variable when the new one is unset). Every other name gets the prefix in front
(DB1_PASSWORD -> AUDITWEB_SOURCE_DB1_PASSWORD, SECRET_KEY -> AUDITWEB_SOURCE_SECRET_KEY): the
operator renames the variable in the workers' environment (README, "Following sources"); a name
that was one of AuditWeb's own secrets then names nothing. Lower-case letters and other
characters become `_` and upper case, as the rule allows only A-Z, 0-9 and _."""

from __future__ import annotations

import re

from django.apps.registry import Apps as StateApps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

OLD_DEFAULT, NEW_DEFAULT, PREFIX = (
    "AUDITWEB_MYSQL_PASSWORD",
    "AUDITWEB_SOURCE_MYSQL_PASSWORD",
    "AUDITWEB_SOURCE_",
)


def renamed(name: str) -> str:
    if not name or re.fullmatch(r"AUDITWEB_SOURCE_[A-Z0-9_]{1,84}", name):
        return name
    if name == OLD_DEFAULT:
        return NEW_DEFAULT
    return (PREFIX + re.sub(r"[^A-Z0-9_]", "_", name.upper()))[:100]


def prefix_names(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Source = apps.get_model("ingest", "Source")
    for source in Source.objects.exclude(password_env=""):
        new = renamed(source.password_env)
        if new != source.password_env:
            Source.objects.filter(pk=source.pk).update(password_env=new)


def back_to_the_old_default(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    apps.get_model("ingest", "Source").objects.filter(password_env=NEW_DEFAULT).update(
        password_env=OLD_DEFAULT
    )


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0014_checkpoints_hold_any_text"),
    ]

    operations = [
        migrations.AlterField(
            model_name="source",
            name="password_env",
            field=models.CharField(
                blank=True,
                default="AUDITWEB_SOURCE_MYSQL_PASSWORD",
                help_text="Environment variable of the worker that holds the database password "
                "(its name starts with AUDITWEB_SOURCE_)",
                max_length=100,
            ),
        ),
        migrations.RunPython(prefix_names, back_to_the_old_default),
    ]
