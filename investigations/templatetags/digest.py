"""Template helpers of the digest page."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def percent(share: float) -> str:
    """A share (0..1) as a percentage, one decimal; a share too small to show is "<0.1%", not 0."""
    if share <= 0:
        return "0%"
    if share < 0.001:
        return "<0.1%"
    return f"{share * 100:.1f}%"
