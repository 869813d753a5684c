"""The explorer's bar (Events/Digest tabs, saved searches) as one tag, so the explorer's
template and view need no more than `{% explorer_bar %}`."""

from __future__ import annotations

from typing import Any

from django import template

from investigations.saved_search_views import tools_context

register = template.Library()


@register.inclusion_tag("investigations/_explorer_bar.html", takes_context=True)
def explorer_bar(context: template.Context) -> dict[str, Any]:
    request = context["request"]
    bar = tools_context(request, context["params"])
    bar.update(csrf_token=context.get("csrf_token"), may_administer=context.get("may_administer"))
    return bar
