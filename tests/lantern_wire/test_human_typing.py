"""type_text's typing at a person's pace (`smooth`) with typos (`typo_chance`), as lantern_wire/keyboard.py plans
it for the hosts: whatever the mistakes, the text left typed is the text given."""
import random

import pytest

from lantern_wire.keyboard import KEY_MS, MAX_TYPO_CHANCE, human_typing, human_typing_bound_ms


def typed(steps, maxlength=None):
    """What a text field holds once the steps ran (one backspace takes back one character; a key past `maxlength`
    types nothing). That a backspace takes back a whole grapheme in a browser is tested on Chromium
    (tests/browserhost/test_computer.py)."""
    field = []
    for step, value, *_ in steps:
        if step == "type":
            field = (field + list(value))[:maxlength]
        elif step == "backspace":
            del field[len(field) - value:]
    return "".join(field)


@pytest.mark.parametrize("seed", range(300))
def test_the_text_left_is_exactly_the_text_given_whatever_the_typos(seed):
    rng = random.Random(seed)
    text = "".join(rng.choice("abzAQ 09.,!?\n\té日😀-") for _ in range(rng.randint(1, 80)))
    assert typed(human_typing(text, rng.choice([0, 0.05, MAX_TYPO_CHANCE]), random.Random(seed))) == text


@pytest.mark.parametrize("seed", range(300))
def test_no_mistake_makes_the_field_hold_more_than_the_text_so_a_maxlength_of_the_text_keeps_it_whole(seed):
    rng = random.Random(seed)
    text = "".join(rng.choice("ab 1z.") for _ in range(rng.randint(1, 12)))
    assert typed(human_typing(text, MAX_TYPO_CHANCE, random.Random(seed)), maxlength=len(text)) == text


def test_a_typo_at_the_last_character_is_never_the_key_twice():
    """Before #35's review, seed 56 typed the last of "12345" twice: a field of maxlength 5 dropped the second,
    and the backspace took back the first."""
    for seed in range(2000):
        steps = human_typing("12345", MAX_TYPO_CHANCE, random.Random(seed))
        assert not any(step == ("type", "1234" + "55", step[2]) for step in steps if step[0] == "type"), seed


def test_only_ascii_letters_and_digits_are_mistyped():
    """The Kelvin sign (U+212A) lowercases to k, and "İ" to two characters: neither is ever mistyped."""
    for seed in range(50):
        steps = human_typing("\u212a\u0130é日😀" * 5, MAX_TYPO_CHANCE, random.Random(seed))
        assert "backspace" not in {step[0] for step in steps}


def test_typos_are_the_asked_share_of_letters_and_digits_and_each_is_backspaced():
    text = "The quick brown fox jumps over the lazy dog 1234567890 " * 4  # 180 letters and digits
    steps = human_typing(text, 0.1, random.Random(7))
    backspaces = [value for step, value, *_ in steps if step == "backspace"]
    assert len(backspaces) == 18 and set(backspaces) <= {1, 2}
    for number, (step, value, *_) in enumerate(steps):
        if step == "backspace":  # what it takes back: letters or digits typed wrong, never a new line or a space
            wrong = steps[number - 2][1][-value:]
            assert steps[number - 1][0] == "pause" and wrong.isascii() and wrong.isalnum()
    assert typed(steps) == text


def test_without_typos_it_is_word_by_word_at_a_persons_pace():
    steps = human_typing("Hello, World! Again", 0, random.Random(1))
    assert [step[1] for step in steps if step[0] == "type"] == ["Hello, ", "World! ", "Again"]
    assert all(KEY_MS[0] <= step[2] <= KEY_MS[1] for step in steps if step[0] == "type")
    assert [step[0] for step in steps] == ["type", "pause", "type", "pause", "type"]
    assert "backspace" not in {step[0] for step in human_typing("no typos here " * 50, 0, random.Random(2))}


def test_the_bound_is_never_shorter_than_the_waits():
    text = "Some words, typed with mistakes. " * 30
    for seed in range(20):
        steps = human_typing(text, 0.1, random.Random(seed))
        waits = sum(value for step, value, *_ in steps if step == "pause") + sum(
            len(step[1]) * step[2] for step in steps if step[0] == "type")
        assert waits <= human_typing_bound_ms(text, 0.1)
