"""One palette of statement types (investigations/views/palette.py) for every chart and every badge."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from investigations.views.palette import (
    CSS_FILE,
    OTHER,
    OTHER_DESTRUCTIVE,
    STATEMENT_COLOURS,
    badge_class,
    colour_of,
    css_name,
    palette_css,
    series_colours,
)
from tests.investigations.logs import SCENARIO

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"


def test_the_stylesheet_is_the_palette_written_out() -> None:
    assert CSS_FILE.read_text() == palette_css(), "run: python -m investigations.views.palette"


def test_each_type_has_its_own_class_and_colour_in_the_stylesheet() -> None:
    css = palette_css()
    names = [css_name(label) for label in STATEMENT_COLOURS]
    assert len(set(names)) == len(names)
    for label, colour in STATEMENT_COLOURS.items():
        assert re.search(rf"\.badge\.{css_name(label)} {{ background: {colour};", css), label


def test_statement_type_badges_in_every_template_take_the_palettes_class() -> None:
    """A badge showing a statement type (or a command) must not choose its own colour."""
    found = 0
    for path in TEMPLATES.rglob("*.html"):
        for badge in re.findall(
            r'<span class="[^"]*badge[^"]*"[^>]*>\{\{ [^}]*(?:statement_type|command)', path.read_text()
        ):
            found += 1
            assert "type_badge" in badge, (path.name, badge)
    assert found >= 5  # explorer rows, session rows, dashboard, table page, case page


def test_the_timeline_script_takes_the_colours_from_the_data() -> None:
    script = (ROOT / "static" / "js" / "auditweb.js").read_text()
    assert "backgroundColor: series.colour" in script
    assert not re.search(r"#[0-9a-fA-F]{6}", script.split("function drawTimeline", 1)[1].split("\n}\n", 1)[0])


def test_series_of_a_type_on_both_sides_stay_apart() -> None:
    colours = series_colours([("UPDATE", True), ("UPDATE", False), ("SELECT", False), ("XA START", True)])
    update, select = STATEMENT_COLOURS["UPDATE"], STATEMENT_COLOURS["SELECT"]
    assert colours == [update, update + "80", select, OTHER_DESTRUCTIVE]
    assert badge_class("XA START", True) == "badge st-other-destructive"
    assert badge_class("XA START", False) == "badge st-other"
    assert colour_of("other", False) == OTHER


@pytest.mark.django_db
def test_the_chart_and_the_badges_of_the_explorer_agree(investigator_client, ingest_bytes) -> None:
    ingest_bytes(SCENARIO.read_bytes(), server="db1")
    html = investigator_client.get("/events/?since=2026-01-01T00:00:00&tz=UTC").content.decode()
    chart = json.loads(
        re.search(r'<script id="timeline-data" type="application/json">(.*?)</script>', html, re.S)[1]
    )
    drawn = {(s["label"], s["destructive"]): s["colour"] for s in chart["series"]}
    assert drawn[("DELETE", True)] == STATEMENT_COLOURS["DELETE"]
    for (label, destructive), colour in drawn.items():
        assert colour.startswith(colour_of(label, destructive)), label
    badges = set(re.findall(r'<span class="badge (st-[a-z-]+)">DELETE</span>', html))
    assert badges == {css_name("DELETE")}
    assert f".badge.{css_name('DELETE')} {{ background: {STATEMENT_COLOURS['DELETE']};" in palette_css()
    assert 'href="/static/css/palette.css"' in html
