"""Which text the computer API types, and how a person would type it.

The app refuses what cannot be typed with a 400 before a host gets it (app/browsers/computer_schemas.py), and a
host checks again before typing anything (browserhost/keys.py), so that a text is typed whole or not at all.

`human_typing` is type_text's `smooth` typing (with its `typo_chance`): the steps a host runs, at a person's pace,
with mistakes noticed and backspaced; `human_typing_bound_ms` is how long those steps may take, which the app waits
for. What is left typed is exactly the text in a plain text field (an input or a text area, a `maxlength` as long as
the text included): a mistake never leaves the field holding more characters than the whole text will, so a field
that takes the text takes every mistake too, and one backspace takes back one mistyped character. Fields that
rewrite what is typed are not plain: an inline-autocomplete combobox (a mistyped letter may pick a suggestion a
backspace then deletes), a masked input (a phone or card number reformatted as typed), one box per digit (a code
whose boxes move the focus on each key); type into those without typos.
"""
import math
import random
import re
import unicodedata

from lantern_wire.pacing import COMMAND_MS

# Kernel's bound for type_text's typo_chance (a share of the characters, corrected with backspace).
MAX_TYPO_CHANCE = 0.1
# A person's pace, in ms: one pace between the keys of a word, a pause between words (half as long again after
# the end of a sentence), a mistake seen a moment after it is typed, and a moment before typing on.
KEY_MS = (50, 120)
WORD_PAUSE_MS = (80, 200)
SENTENCE_PAUSE = 1.5
NOTICE_MS = (200, 500)
RESUME_MS = (40, 120)
# The keys either side of each on a US keyboard's rows: a slipped finger's typo.
_ROWS = ("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm")
_NEIGHBOURS = {row[i]: row[max(0, i - 1):i] + row[i + 1:i + 2] for row in _ROWS for i in range(len(row))}
# A word and the spaces after it (a text's leading spaces go with its first word).
WORDS = re.compile(r"\s*\S+\s*|\s+")


def untypable(text):
    """The first character of `text` no keyboard types (a control character other than a new line or a tab, or half
    of a surrogate pair), or None. Every other character is typed, headful as headless."""
    for char in text:
        category = unicodedata.category(char)
        if (category == "Cc" and char not in "\n\t") or category == "Cs":
            return char
    return None


def human_typing(text, typo_chance=0.0, rng=None):
    """The steps that type `text` as a person would, in order: ("type", chars, ms between their keys),
    ("pause", ms) and ("backspace", how many). Word by word, each at its own pace; a share `typo_chance` of the
    ASCII letters and digits typed wrong first (the key beside it, the key twice, or it and the next one swapped),
    then backspaced and typed right. Mistakes are only ever ASCII letters and digits, so one backspace takes back
    exactly one of them, and never a new line (which could submit a form). Never the key twice at the text's last
    character: a field whose maxlength is the text's would drop the extra key, and the backspace would take back
    a right one. A swap types the two keys of the text at its place, so it never lengthens the field."""
    rng = rng or random.Random()
    typos = set(rng.sample(*_typos(text, typo_chance, rng)))
    steps, start = [], 0
    words = WORDS.findall(text)
    for number, word in enumerate(words):
        pace, end = rng.randint(*KEY_MS), start + len(word)
        cursor = start
        for at in sorted(typos.intersection(range(start, end))):  # a swapped pair's second is never one
            typed, backspaces, retyped, done = _mistake(text, at, end, at + 1 not in typos, rng)
            steps += [("type", text[cursor:at] + typed, pace), ("pause", rng.randint(*NOTICE_MS)),
                      ("backspace", backspaces), ("pause", rng.randint(*RESUME_MS)), ("type", retyped, pace)]
            cursor = at + done
        steps.append(("type", text[cursor:end], pace))
        if number < len(words) - 1:
            pause = rng.randint(*WORD_PAUSE_MS)
            steps.append(("pause", round(pause * SENTENCE_PAUSE) if word.rstrip()[-1:] in ".!?" else pause))
        start = end
    return [step for step in steps if step[0] != "type" or step[1]]


def human_typing_bound_ms(text, typo_chance=0.0, command_ms=COMMAND_MS):
    """The longest `human_typing(text, typo_chance)` may take to run: its waits at their longest, and each step's
    `command_ms` (a command on a display; 0 by DevTools)."""
    words = len(WORDS.findall(text))
    _, typos = _typos(text, typo_chance, None)
    per_typo = NOTICE_MS[1] + RESUME_MS[1] + 2 * KEY_MS[1] + 4 * command_ms  # 2 keys more, 2 backspaces
    return (len(text) * KEY_MS[1] + words * (WORD_PAUSE_MS[1] * SENTENCE_PAUSE + command_ms)
            + typos * per_typo)


def _typos(text, typo_chance, rng):
    """(the positions a typo may be at, how many there are): `typo_chance` of them, rounded up or down at random
    (`rng`), or up when `rng` is None."""
    able = [at for at, char in enumerate(text) if _mistypable(char)]
    share = typo_chance * len(able)
    return able, math.ceil(share) if rng is None else min(len(able), math.floor(share + rng.random()))


def _mistake(text, at, end, may_swap, rng):
    """(what is typed instead of the character at `at`, how many backspaces take it back, what is typed then, how
    many characters of the text that leaves typed). `may_swap`: whether the next character may be typed first (it
    is not a typo of its own)."""
    char = text[at]
    following = text[at + 1] if at + 1 < end and may_swap else ""
    kinds = ["beside"] + (["twice"] if at + 1 < len(text) else []) + (
        ["swapped"] if _mistypable(following) and following != char else [])
    kind = rng.choice(kinds)
    if kind == "beside":
        wrong = rng.choice(_NEIGHBOURS[char.lower()])
        return (wrong.upper() if char.isupper() else wrong), 1, char, 1
    if kind == "twice":
        return char * 2, 1, "", 1
    return following + char, 2, char + following, 2


def _mistypable(char):
    """Whether a typo may be made at `char`: an ASCII letter or digit (U+212A, the Kelvin sign, lowercases to k)."""
    return char.isascii() and char.lower() in _NEIGHBOURS
