"""mask_text: what it hides, and that its fast path hides exactly what the plain
IGNORECASE patterns would."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork.security import masking
from tickwork.security.masking import MASK, mask_text


def reference(text: str) -> str:
    """The straightforward form: every pattern over the whole text, ignoring case."""
    text = masking._USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    for pattern in (masking._QUERY, masking._AUTH, masking._PAIR):
        text = pattern.sub(rf"\g<k>{MASK}", text)
    return text


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("GET https://bob:hunter2@db.example/x", "GET https://***@db.example/x"),
        ("url=http://h/p?Api_Key=abc&page=2", "url=http://h/p?Api_Key=***&page=2"),
        ("Authorization: Bearer eyJhbGci.x.y", "Authorization: ***"),
        ("PASSWORD=s3cret other=1", "PASSWORD=*** other=1"),
        ('{"session_token": "abc"}', '{"session_token": "***"}'),
        ("nothing to hide here: 42 = 42", "nothing to hide here: 42 = 42"),
        ("İSTANBUL TOKEN=abc", "İSTANBUL TOKEN=***"),  # lower() grows the text: slow path
    ],
)
def test_mask_text_hides_secret_looking_values(text: str, masked: str) -> None:
    assert mask_text(text) == masked == reference(text)


ALPHABET = st.sampled_from(
    [*"aZ09 =:&?;@/\"'\n,.-_*İ", "token", "KEY", "Passw", "authorization", "bearer ", "://"]
)


@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_the_fast_path_masks_exactly_what_the_reference_does(text: str) -> None:
    assert mask_text(text) == reference(text)


def test_a_megabyte_without_secret_names_is_returned_unchanged() -> None:
    text = "x" * (1 << 20) + "\nplain words = 3 @ home\n"
    assert mask_text(text) == text
