"""The pgAudit scene played again on a private PostgreSQL cluster, checked against its truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.pgaudit_scene.regenerate import missing, write_scene
from tests.parsers.pgaudit_truth import check_against_truth

pytestmark = pytest.mark.skipif(missing() is not None, reason=f"cannot start a pgAudit cluster: {missing()}")


def test_a_fresh_scene_reads_as_its_truth(tmp_path: Path) -> None:
    truth = write_scene(tmp_path)
    for layout in ("csv", "json", "log"):
        check_against_truth(tmp_path, truth, layout)
