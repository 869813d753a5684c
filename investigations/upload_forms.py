"""The upload form: a log file and what the log does not say itself."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms

from ingest.parsers import AUTO, format_choices


class UploadForm(forms.Form):
    file = forms.FileField(help_text="A log file, plain or .gz, of any size")
    server = forms.CharField(max_length=200, help_text="Label of the database server it comes from")
    format = forms.ChoiceField(choices=format_choices, initial=AUTO)
    timezone = forms.CharField(max_length=64, initial="UTC", help_text="Zone of times printed without one")

    def clean_timezone(self) -> str:
        zone = self.cleaned_data["timezone"]
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise forms.ValidationError(f"{zone!r} is not a time zone (e.g. UTC, Europe/Berlin).") from None
        return str(zone)
