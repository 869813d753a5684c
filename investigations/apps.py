from __future__ import annotations

from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    name = "investigations"
    verbose_name = "Investigations"

    def ready(self) -> None:
        from investigations.audit import connect_signals, connect_throttling_signals

        connect_signals()
        connect_throttling_signals()
