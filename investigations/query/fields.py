"""The strict parameter fields every filter uses: a bad value is refused (400), never read as "any"."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms

BIGINT = 2**63  # PostgreSQL's bigint holds -BIGINT .. BIGINT - 1


class WholeNumberField(forms.IntegerField):
    """Digits only: Django's IntegerField also takes `1.0` as 1."""

    def to_python(self, value: object) -> int | None:
        if isinstance(value, str) and value.strip() and not re.fullmatch(r"\s*[+-]?\d+\s*", value):
            raise forms.ValidationError("A whole number.", code="invalid")
        return super().to_python(value)


class BigIntegerFilter(django_filters.NumberFilter):
    """A whole number a bigint column can hold: `1.5` or `99999999999999999999` is refused (400)
    rather than compared in decimals or sent to PostgreSQL to overflow."""

    field_class = WholeNumberField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", -BIGINT)
        kwargs.setdefault("max_value", BIGINT - 1)
        super().__init__(*args, **kwargs)


class StrictBooleanField(forms.NullBooleanField):
    """`true`/`false` (or `1`/`0`, any case); empty is "not given". Django's NullBooleanField reads
    anything else as "not given" too, so `destructive=yes` would silently filter nothing."""

    def to_python(self, value: object) -> bool | None:
        if value in (None, ""):
            return None
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise forms.ValidationError("Give true or false.", code="invalid")

    def validate(self, value: object) -> None:
        pass


class BooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", forms.TextInput)  # (django-filter's reads other words as None)
        super().__init__(*args, **kwargs)


class UtcDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 time, turned into UTC here: PostgreSQL takes offsets up to 15:59 only (Python
    up to 23:59), and a time that is no instant AuditWeb can compare is refused (400)."""

    def to_python(self, value: object) -> datetime | None:
        when = super().to_python(value)
        if when is None:
            return None
        try:
            return when.astimezone(UTC)
        except (OverflowError, ValueError):
            raise forms.ValidationError("This time is out of range.", code="invalid") from None


class TimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcDateTimeField


# Columns the explorer and the API sort by (`sort=server`, `sort=-server`): each a text value of
