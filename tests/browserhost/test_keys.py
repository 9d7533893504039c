"""xdotool key names as DevTools key events (browserhost/keys.py)."""
import re

import pytest

from browserhost import keys


def names(name):
    return [(key.key, key.code) for key in keys.combination(name)]


@pytest.mark.parametrize("name, expected", [
    ("Return", [("Enter", "Enter")]), ("BackSpace", [("Backspace", "Backspace")]), ("F5", [("F5", "F5")]),
    ("ctrl+a", [("Control", "ControlLeft"), ("a", "KeyA")]),
    ("Ctrl+Shift+Tab", [("Control", "ControlLeft"), ("Shift", "ShiftLeft"), ("Tab", "Tab")]),
    ("Ctrl+minus", [("Control", "ControlLeft"), ("-", "Minus")]),
    ("Ctrl+-", [("Control", "ControlLeft"), ("-", "Minus")]),  # a literal hyphen stands for minus
    ("ctrl+plus", [("Control", "ControlLeft"), ("Shift", "ShiftLeft"), ("=", "Equal")]),
    ("ctrl++", [("Control", "ControlLeft"), ("Shift", "ShiftLeft"), ("=", "Equal")]),
    ("A", [("Shift", "ShiftLeft"), ("a", "KeyA")]), ("super+l", [("Meta", "MetaLeft"), ("l", "KeyL")]),
    ("Page_Down", [("PageDown", "PageDown")]), ("KP_Enter", [("Enter", "Enter")]), ("space", [(" ", "Space")]),
])
def test_names_and_combinations_become_keys(name, expected):
    assert names(name) == expected


def test_an_unknown_key_is_named_in_the_error():
    with pytest.raises(keys.UnknownKey, match="NoSuchKey"):
        keys.combination("ctrl+NoSuchKey")


@pytest.mark.parametrize("name", ["ctrl+", "Ctrl+Shift+", "+a", "ctrl+++", "++"])
def test_a_plus_with_no_key_beside_it_is_refused_naming_the_key(name):
    with pytest.raises(keys.UnknownKey, match=re.escape(repr(name))):
        keys.combination(name)


def test_characters_are_typed_by_their_key_shifted_where_a_us_keyboard_shifts_them():
    assert [key.code for key in keys.typing("a")] == ["KeyA"]
    assert [key.code for key in keys.typing("?")] == ["ShiftLeft", "Slash"]
    assert [key.code for key in keys.typing("7")] == ["Digit7"]
    assert keys.typing("é") is None  # inserted as text instead
    assert keys.modifiers_of(keys.combination("ctrl+shift+a")) == keys.CTRL | keys.SHIFT
