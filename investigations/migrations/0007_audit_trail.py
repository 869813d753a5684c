"""AuditWeb's own audit trail (investigations.trail), append-only: a trigger refuses every UPDATE
and DELETE of its rows, whoever asks (TRUNCATE, a table owner's act, is left to the database's
grants: give the web app's role no TRUNCATE in production)."""

import django.core.serializers.json
import django.utils.timezone
from django.db import migrations, models

APPEND_ONLY = """
CREATE FUNCTION investigations_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'AuditWeb''s audit trail is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER investigations_auditrecord_append_only
    BEFORE UPDATE OR DELETE ON investigations_auditrecord
    FOR EACH STATEMENT EXECUTE FUNCTION investigations_audit_append_only();
"""
DROP_APPEND_ONLY = """
DROP TRIGGER investigations_auditrecord_append_only ON investigations_auditrecord;
DROP FUNCTION investigations_audit_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("investigations", "0006_cases"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditRecord",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField(default=django.utils.timezone.now)),
                ("user_id", models.BigIntegerField(blank=True, null=True)),
                (
                    "username",
                    models.CharField(blank=True, help_text="As typed, for a failed login", max_length=150),
                ),
                ("action", models.CharField(max_length=40)),
                ("ip", models.GenericIPAddressField(blank=True, null=True)),
                ("method", models.CharField(blank=True, max_length=10)),
                ("path", models.CharField(blank=True, max_length=1000)),
                (
                    "token",
                    models.CharField(
                        blank=True, help_text="Prefix of the API token used, if any", max_length=16
                    ),
                ),
                (
                    "details",
                    models.JSONField(default=dict, encoder=django.core.serializers.json.DjangoJSONEncoder),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["username", "-id"], name="audit_by_user"),
                    models.Index(fields=["action", "-id"], name="audit_by_action"),
                    models.Index(fields=["at"], name="audit_at"),
                ],
            },
        ),
        migrations.RunSQL(APPEND_ONLY, reverse_sql=DROP_APPEND_ONLY),
    ]
