"""Forms of the pages: a case's facts, its investigators, the pin popover, and a log file uploaded."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from ingest.parsers import AUTO, format_choices
from ingest.sources import time_zone
from investigations.cases import MAX_PINS_PER_REQUEST
from investigations.models import MAX_CASE_TEXT, Case, Report
from investigations.roles import Role

NEW_CASE = "new"


def _local(field: forms.DateTimeField) -> forms.DateTimeField:
    attrs = {"type": "datetime-local", "step": "1"}
    field.widget = forms.DateTimeInput(attrs=attrs, format="%Y-%m-%dT%H:%M:%S")
    return field


def investigator_users() -> QuerySet[Any]:
    """Logins that may work on a case: the investigator and admin roles, and superusers."""
    names = [Role.INVESTIGATOR.group_name, Role.ADMIN.group_name]
    users = get_user_model().objects.filter(is_active=True)
    return users.filter(Q(groups__name__in=names) | Q(is_superuser=True)).distinct().order_by("username")


class CaseForm(forms.ModelForm):
    """Title, description and the time window (in the page's zone, like the explorer's)."""

    description = forms.CharField(
        required=False, max_length=MAX_CASE_TEXT, widget=forms.Textarea(attrs={"rows": 4})
    )
    window_start = _local(forms.DateTimeField(required=False, label="Window from"))
    window_end = _local(forms.DateTimeField(required=False, label="Window until"))

    class Meta:
        model = Case
        fields = ["title", "description", "window_start", "window_end"]
        widgets = {"description": forms.Textarea(attrs={"rows": 4})}
        help_texts = {
            "window_start": "The time the investigation is about; empty: from the first pinned event",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        start, end = data.get("window_start"), data.get("window_end")
        if start and end and end < start:
            self.add_error("window_end", "The window ends before it starts.")
        return data


class CaseEditForm(CaseForm):
    investigators = forms.ModelMultipleChoiceField(
        queryset=investigator_users(),
        widget=forms.CheckboxSelectMultiple,
        help_text="Who may change the case: pin, write notes, edit, close and generate reports",
    )

    class Meta(CaseForm.Meta):
        fields = [*CaseForm.Meta.fields, "investigators"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["investigators"].queryset = investigator_users()


class PinForm(forms.Form):
    """Pin an event into a case the user chooses, or into a new one named here."""

    event = forms.IntegerField(widget=forms.HiddenInput)
    case = forms.ChoiceField(label="Case")
    title = forms.CharField(max_length=200, required=False, label="New case's title")
    note = forms.CharField(
        required=False,
        max_length=MAX_CASE_TEXT,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Note (optional)",
    )

    def __init__(self, *args: Any, cases: QuerySet[Case], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cases = {str(c.pk): c for c in cases[:50]}
        choices = [(pk, f"#{pk} {c.title}") for pk, c in self.cases.items()]
        self.fields["case"].choices = [*choices, (NEW_CASE, "New case…")]
        self.fields["case"].initial = next(iter(self.cases), NEW_CASE)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("case") == NEW_CASE and not (data.get("title") or "").strip():
            self.add_error("title", "Name the new case.")
        return data

    def chosen_case(self) -> Case | None:
        """The existing case chosen (None: a new case)."""
        return self.cases.get(self.cleaned_data["case"])


class NoteForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), label="Note", max_length=MAX_CASE_TEXT)


class SavedFilterForm(forms.Form):
    name = forms.CharField(max_length=200)
    query = forms.CharField(
        max_length=4000,
        label="Explorer query",
        help_text="The part after ? of an explorer address (or the whole address)",
    )

    def clean_query(self) -> str:
        query = self.cleaned_data["query"].strip()
        return query.split("?", 1)[1] if "?" in query else query


class SaveSearchForm(SavedFilterForm):
    """An explorer search saved into one of the user's open cases."""

    case = forms.ChoiceField(label="Case")

    def __init__(self, *args: Any, cases: QuerySet[Case], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cases = {str(c.pk): c for c in cases[:50]}
        self.fields["case"].choices = [(pk, f"#{pk} {c.title}") for pk, c in self.cases.items()]

    def chosen_case(self) -> Case:
        return self.cases[self.cleaned_data["case"]]


class ReportForm(forms.Form):
    format = forms.ChoiceField(choices=Report.Format.choices)


class EventIdsField(forms.Field):
    """Event ids ticked on a page (`event=1&event=2...`), each once, at most MAX_PINS_PER_REQUEST."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[int]:
        try:
            ids = [int(v) for v in (value or [])]
        except (TypeError, ValueError):
            raise forms.ValidationError("Events are named by their ids, whole numbers.") from None
        if any(not 0 < i < 2**63 for i in ids):
            raise forms.ValidationError("No event has such an id.")
        return list(dict.fromkeys(ids))

    def validate(self, value: list[int]) -> None:
        if not value:
            raise forms.ValidationError("Tick the events to pin first.")
        if len(value) > MAX_PINS_PER_REQUEST:
            raise forms.ValidationError(
                f"{len(value)} events are ticked: at most {MAX_PINS_PER_REQUEST} are pinned at once."
            )


class BulkPinForm(PinForm):
    """Pin the ticked events of a page into one case (or a new one); `next` is the page to go back to."""

    event = EventIdsField()
    next = forms.CharField(required=False, max_length=4000, widget=forms.HiddenInput)


class SearchCaseForm(forms.Form):
    """A new case made from the explorer's search (its filters are the page's query string)."""

    title = forms.CharField(max_length=200)
    description = forms.CharField(
        required=False, max_length=MAX_CASE_TEXT, widget=forms.Textarea(attrs={"rows": 3})
    )


class UploadForm(forms.Form):
    file = forms.FileField(help_text="A log file, plain or .gz, of any size")
    server = forms.CharField(max_length=200, help_text="Label of the database server it comes from")
    format = forms.ChoiceField(choices=format_choices, initial=AUTO)
    timezone = forms.CharField(max_length=64, initial="UTC", help_text="Zone of times printed without one")

    def clean_timezone(self) -> str:
        return time_zone(self.cleaned_data["timezone"])
