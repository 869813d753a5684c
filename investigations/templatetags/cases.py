"""Template helpers of the case pages and of the pin buttons beside events."""

from __future__ import annotations

from typing import Any

from django import template

from investigations.roles import Role, has_role

register = template.Library()


@register.filter
def may_pin(user: Any) -> bool:
    """Whether to offer the pin button: the investigator role (cases are theirs)."""
    return has_role(user, Role.INVESTIGATOR)
