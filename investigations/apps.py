from __future__ import annotations

from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    name = "investigations"
    verbose_name = "Investigations"
