"""Saved searches from the explorer: save in one click, open by address, rename, share, delete.
The permission rules are in `investigations.saved_searches` (one place)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from investigations import trail
from investigations.models import SavedFilter
from investigations.query.filters import filter_events
from investigations.roles import Role, has_role, role_required
from investigations.saved_searches import (
    NAME_MAX,
    QUERY_MAX,
    can_change_saved_search,
    can_open_saved_search,
    saved_search_find,
    saved_search_save,
    saved_searches_for,
    search_query,
)

VIEWS = {"events": "events", "digest": "digest"}  # ?view= of a saved search's address


def tools_context(request: HttpRequest, params: QueryDict, **extra: Any) -> dict[str, Any]:
    """What the explorer's saved-search bar shows: the save button for these filters, the list."""
    query = search_query(params)
    searches = saved_searches_for(request.user)
    return {
        "request": request,
        "query": query,
        "searches": searches,
        "current": saved_search_find(searches, query),
        "may_investigate": has_role(request.user, Role.INVESTIGATOR),
        **extra,
    }


def _get_saved(request: HttpRequest, saved_id: int, *, change: bool = False) -> SavedFilter:
    """The saved search, or 404; 403 unless the user may open it (or, change=True, change it)."""
    saved = get_object_or_404(SavedFilter.objects.select_related("case", "created_by"), pk=saved_id)
    allowed = can_change_saved_search if change else can_open_saved_search
    if not allowed(request.user, saved):
        raise PermissionDenied("You may not " + ("change" if change else "open") + " this saved search.")
    return saved


@require_POST
@role_required(Role.VIEWER)
def saved_search_create(request: HttpRequest) -> HttpResponse:
    """One click: the explorer's filters (the `query` field) saved under a name made from them."""
    raw = request.POST.get("query", "")
    params = QueryDict(raw.lstrip("?"))
    flt = filter_events(params)
    if len(raw) > QUERY_MAX or not flt.is_valid():
        return HttpResponse("Only a valid explorer search can be saved.", status=400)
    saved, created = saved_search_save(user=request.user, params=params)
    if created:
        trail.record(request, trail.Action.SEARCH_SAVE, search=saved.pk, query=saved.query)
    view = VIEWS.get(request.POST.get("view", ""), "events")
    if request.htmx:
        context = tools_context(request, params, just_saved=saved, created=created, view=view)
        return render(request, "investigations/_explorer_tools.html", context)
    said = "Saved as" if created else "Already saved as"
    messages.success(request, f"{said} “{saved.name}”.")
    return HttpResponseRedirect(reverse(view) + "?" + saved.query)


@require_GET
@role_required(Role.VIEWER)
def saved_search_open(request: HttpRequest, saved_id: int) -> HttpResponse:
    """A saved search's lasting address: the explorer (or `?view=digest`) with its filters."""
    saved = _get_saved(request, saved_id)
    view = VIEWS.get(request.GET.get("view", ""), "events")
    # Re-encoded: a query typed on a case's page reaches the redirect only as a query string.
    return HttpResponseRedirect(reverse(view) + "?" + QueryDict(saved.query).urlencode())


class SavedSearchForm(forms.ModelForm):
    name = forms.CharField(max_length=NAME_MAX)

    class Meta:
        model = SavedFilter
        fields = ["name", "shared"]
        labels = {"shared": "Shared: list it in everyone's explorer"}


@require_http_methods(["GET", "POST"])
@role_required(Role.VIEWER)
def saved_search_edit(request: HttpRequest, saved_id: int) -> HttpResponse:
    saved = _get_saved(request, saved_id, change=True)
    form = SavedSearchForm(request.POST or None, instance=saved)
    if request.method == "POST" and form.is_valid():
        form.save()
        trail.record(request, trail.Action.SEARCH_SAVE, search=saved.pk, changed=form.changed_data)
        messages.success(request, f"Saved “{saved.name}”.")
        return HttpResponseRedirect(reverse("events") + "?" + QueryDict(saved.query).urlencode())
    address = request.build_absolute_uri(reverse("saved-search", args=[saved.pk]))
    context = {"form": form, "saved": saved, "address": address, "query": QueryDict(saved.query).urlencode()}
    status = 400 if form.errors else 200
    return render(request, "investigations/saved_search_edit.html", context, status=status)


@require_POST
@role_required(Role.VIEWER)
def saved_search_delete(request: HttpRequest, saved_id: int) -> HttpResponse:
    saved = _get_saved(request, saved_id, change=True)
    query = QueryDict(saved.query).urlencode()
    saved.delete()
    trail.record(request, trail.Action.SEARCH_SAVE, search=saved_id, deleted=True)
    messages.success(request, f"Deleted the saved search “{saved.name}”.")
    return HttpResponseRedirect(reverse("events") + "?" + query)
