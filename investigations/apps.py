from __future__ import annotations

from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    name = "investigations"
    verbose_name = "Investigations"

    def ready(self) -> None:
        # (the trail defines a model: it may be imported only once the app registry is being filled)
        from investigations.trail import connect_signals, connect_throttling_signals

        connect_signals()
        connect_throttling_signals()
