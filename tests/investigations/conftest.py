"""Fixtures of the investigation tests."""

from __future__ import annotations

import pytest

from tests.investigations.cases_data import story


@pytest.fixture
def events(ingest_bytes):
    """The cases' story (tests/investigations/cases_data.py) ingested as server db1: Event.objects."""
    from ingest.models import Event  # imported here: models load once pytest-django set Django up

    ingest_bytes(story(), server="db1")
    return Event.objects
