"""The explorer's bar (Events/Digest tabs, saved searches) as one tag, so the explorer's
template and view need no more than `{% explorer_bar %}`."""

from __future__ import annotations

from typing import Any

from django import template

from investigations.views.saved_searches import tools_context

register = template.Library()


@register.inclusion_tag("investigations/_explorer_bar.html", takes_context=True)
def explorer_bar(context: template.Context) -> dict[str, Any]:
    """The explorer's Events/Digest tabs and its saved-search bar."""
    return saved_search_tools(context)


@register.inclusion_tag("investigations/_explorer_tools.html", takes_context=True)
def saved_search_tools(context: template.Context, view: str = "events") -> dict[str, Any]:
    """The saved-search bar alone (the digest page has its own tabs): saved searches open in `view`."""
    bar = tools_context(context["request"], context["params"], view=view)
    bar.update(csrf_token=context.get("csrf_token"), may_administer=context.get("may_administer"))
    return bar
