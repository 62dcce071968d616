"""Who a change is recorded as when --by is left out: the configured name, else the login name; an empty --by and
no name at all are refused with one sentence that says what to pass."""

from __future__ import annotations

import pytest

from services.app.identity import IdentityError, signer
from services.app.settings import load_settings


def test_a_given_name_wins():
    assert signer("carol", "alice", login=lambda: "bob") == "carol"


def test_left_out_the_configured_name_then_the_login_name():
    assert signer(None, "alice", login=lambda: "bob") == "alice"
    assert signer(None, None, login=lambda: "bob") == "bob"


@pytest.mark.parametrize("given", ["", "   "])
def test_an_empty_by_is_refused_saying_what_to_pass_and_what_leaving_it_out_does(given):
    with pytest.raises(IdentityError) as refused:
        signer(given, None, login=lambda: "bob")
    assert str(refused.value) == "by: must not be empty; pass --by NAME, or leave --by out to be recorded as bob"


def test_with_no_name_anywhere_it_says_to_pass_by():
    with pytest.raises(
        IdentityError,
        match=r"^no name to record this change under: pass --by NAME \(or set "
        r"identity.name in the config file, or CLAIMWATCH_IDENTITY__NAME\)$",
    ):
        signer(None, None, login=lambda: None)


def test_the_name_is_a_setting_from_the_environment():
    assert load_settings(None, {"CLAIMWATCH_IDENTITY__NAME": "alice"}).identity.name == "alice"
    assert load_settings(None, {}).identity.name is None
