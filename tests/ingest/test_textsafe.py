"""Checkpoints hold any text a log holds, and give it back exactly (ingest.textsafe): NUL, lone
surrogates and the escape character itself, in values and in keys, through real PostgreSQL jsonb."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.models import Source
from ingest.textsafe import ESCAPE, displayable, storable, unstorable

# Text of any code point, the awkward ones often: NUL, surrogates, the escape character, its code.
awkward = st.text(
    alphabet=st.one_of(
        st.sampled_from(["\x00", "\ud800", "\udfff", ESCAPE, "0", "e", "\\"]), st.characters()
    ),
    max_size=12,
)
values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | awkward,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(awkward, inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.django_db
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=st.dictionaries(awkward, values, max_size=5))
def test_a_checkpoint_comes_back_exactly_as_it_was_saved(state: dict[str, object]) -> None:
    source, _ = Source.objects.get_or_create(name="textsafe", defaults={"server": "db1", "path": "/x"})
    Source.objects.filter(pk=source.pk).update(checkpoint=state)
    assert Source.objects.get(pk=source.pk).checkpoint == state


def test_messages_show_what_text_cannot_hold() -> None:
    assert storable("user 'a\x00b' \ud800") == "user 'a\\x00b' \\ud800"
    assert displayable("a\x00b\udc80") == "ab\ufffd"
    assert unstorable("x\x00") and unstorable("\udfff") and not unstorable("plain é ✓ 😀")
