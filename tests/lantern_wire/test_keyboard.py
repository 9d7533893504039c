"""Which text the computer API types (lantern_wire/keyboard.py), the one rule of the app and its hosts."""
import pytest

from lantern_wire.keyboard import untypable


def test_letters_of_every_script_symbols_emoji_new_lines_and_tabs_are_typed():
    assert untypable("naïve café Élan 日本語 😀 Ω≈ €£¥\n\t") is None


@pytest.mark.parametrize("text, char", [("ab\x07c", "\x07"), ("esc \x1b", "\x1b"), ("a\ud800", "\ud800"),
                                        ("\r", "\r"), ("\x7f", "\x7f")])
def test_the_first_control_character_or_half_surrogate_is_named(text, char):
    assert untypable(text) == char
