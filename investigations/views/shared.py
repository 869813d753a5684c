"""What several pages share: the partial htmx swaps, and the quick time ranges of the filter form."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.utils import timezone

QUICK_RANGES = {"1h": ("Last hour", timedelta(hours=1)), "24h": ("Last 24 hours", timedelta(days=1)),
                "7d": ("Last 7 days", timedelta(days=7))}  # fmt: skip


def htmx_template(request: HttpRequest, template: str, partial: str) -> str:
    """The named partial for htmx's swaps; the whole page for browsers, and for htmx restoring
    history (it asks for the page it lost)."""
    if request.htmx and not request.htmx.history_restore_request:
        return f"{template}#{partial}"
    return template


def quick_range(params: QueryDict) -> QueryDict | None:
    """`range=24h` (a quick pick) as the From/Until it means now, in the page's zone: the URL
    then names the instants, so it shows the same events tomorrow. None: no quick pick asked."""
    if params.get("range") not in QUICK_RANGES:
        return None
    until = timezone.localtime().replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = until - QUICK_RANGES[params["range"]][1]
    resolved = params.copy()
    for name in ("range", "cursor"):
        resolved.pop(name, None)
    resolved["since"], resolved["until"] = (t.strftime("%Y-%m-%dT%H:%M:%S") for t in (since, until))
    resolved["tz"] = timezone.get_current_timezone_name()
    return resolved


def quick_range_choices() -> list[tuple[str, str]]:
    """The quick picks as the form offers them: (value, label)."""
    return [(key, label) for key, (label, _) in QUICK_RANGES.items()]


@dataclass(frozen=True)
class QuickRange:
    """A page's parameters with its quick pick resolved (`quick_range`): a browser is redirected to
    the URL naming the instants, an htmx swap is answered at once and pushes that URL."""

    params: QueryDict  # what the page filters by
    url: str | None  # the URL naming the instants, when a quick pick was resolved
    redirect: HttpResponse | None  # answer this instead of the page

    @classmethod
    def of(cls, request: HttpRequest) -> QuickRange:
        resolved = quick_range(request.GET)
        if resolved is None:
            return cls(request.GET, None, None)
        url = f"{request.path}?{resolved.urlencode()}"
        return cls(resolved, url, None if request.htmx else HttpResponseRedirect(url))

    def push(self, response: HttpResponse) -> HttpResponse:
        """The page's answer, telling htmx to show the resolved URL in the address bar."""
        if self.url is not None:
            response["HX-Push-Url"] = self.url
        return response


def kept_filters(params: QueryDict, names: tuple[str, ...]) -> list[dict[str, str]]:
    """Filters a link set that the form has no field for, each as a chip with the query without it."""
    kept = []
    for name in names:
        value = params.get(name, "").strip()
        if value:
            without = params.copy()
            without.pop(name)
            kept.append({"name": name, "value": value, "drop_query": without.urlencode()})
    return kept
