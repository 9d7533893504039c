"""xdotool-style key names ("Return", "ctrl+a", "Ctrl+Shift+Tab", "ctrl+minus") as DevTools key events.

The computer API names keys as xdotool does (X11 keysym names, case-insensitive for the named ones,
`+` between the keys of a combination, a literal "-" standing for "minus"). A headless session has no X
display: its keys become `Input.dispatchKeyEvent` calls, which need the DOM `key`, the physical `code`
and the Windows virtual key code Chromium dispatches by, and the text a key types (none while Ctrl, Alt
or Meta is held, as on a real keyboard).
"""
from dataclasses import dataclass


class UnknownKey(ValueError):
    """A key name neither X11 nor this table knows."""


@dataclass(frozen=True)
class Key:
    key: str  # the DOM KeyboardEvent.key
    code: str  # the DOM KeyboardEvent.code
    key_code: int  # windowsVirtualKeyCode
    text: str = ""  # what it types, if anything (unshifted)
    shifted: str = ""  # what it types with Shift held
    modifier: int = 0  # its bit in Input.dispatchKeyEvent's modifiers (Alt 1, Ctrl 2, Meta 4, Shift 8)
    keysym: str = ""  # its X11 keysym name, for xdotool on a headful session's display


ALT, CTRL, META, SHIFT = 1, 2, 4, 8

_MODIFIERS = {
    "shift": Key("Shift", "ShiftLeft", 16, modifier=SHIFT, keysym="Shift_L"),
    "ctrl": Key("Control", "ControlLeft", 17, modifier=CTRL, keysym="Control_L"),
    "alt": Key("Alt", "AltLeft", 18, modifier=ALT, keysym="Alt_L"),
    "super": Key("Meta", "MetaLeft", 91, modifier=META, keysym="Super_L"),
}
_NAMED = {
    "return": Key("Enter", "Enter", 13, "\r", keysym="Return"),
    "tab": Key("Tab", "Tab", 9, keysym="Tab"),
    "escape": Key("Escape", "Escape", 27, keysym="Escape"),
    "backspace": Key("Backspace", "Backspace", 8, keysym="BackSpace"),
    "delete": Key("Delete", "Delete", 46, keysym="Delete"),
    "insert": Key("Insert", "Insert", 45, keysym="Insert"),
    "home": Key("Home", "Home", 36, keysym="Home"),
    "end": Key("End", "End", 35, keysym="End"),
    "page_up": Key("PageUp", "PageUp", 33, keysym="Prior"),
    "page_down": Key("PageDown", "PageDown", 34, keysym="Next"),
    "left": Key("ArrowLeft", "ArrowLeft", 37, keysym="Left"),
    "up": Key("ArrowUp", "ArrowUp", 38, keysym="Up"),
    "right": Key("ArrowRight", "ArrowRight", 39, keysym="Right"),
    "down": Key("ArrowDown", "ArrowDown", 40, keysym="Down"),
    "space": Key(" ", "Space", 32, " ", " ", keysym="space"),
    "caps_lock": Key("CapsLock", "CapsLock", 20, keysym="Caps_Lock"),
    "menu": Key("ContextMenu", "ContextMenu", 93, keysym="Menu"),
    **{f"f{n}": Key(f"F{n}", f"F{n}", 111 + n, keysym=f"F{n}") for n in range(1, 13)},
}
# Other X11 names of the same keys.
_ALIASES = {
    "enter": "return", "kp_enter": "return", "esc": "escape", "del": "delete", "prior": "page_up",
    "next": "page_down", "pageup": "page_up", "pagedown": "page_down", "control": "ctrl", "control_l": "ctrl",
    "control_r": "ctrl", "shift_l": "shift", "shift_r": "shift", "alt_l": "alt", "alt_r": "alt", "meta": "super",
    "meta_l": "super", "meta_r": "super", "super_l": "super", "super_r": "super", "cmd": "super",
    "iso_left_tab": "tab",
}
# Punctuation: the X11 name, its character, and its DOM code, key code and shifted character on a US layout.
_PUNCTUATION = (
    ("minus", "-", "Minus", 189, "_"), ("equal", "=", "Equal", 187, "+"), ("bracketleft", "[", "BracketLeft", 219, "{"),
    ("bracketright", "]", "BracketRight", 221, "}"), ("backslash", "\\", "Backslash", 220, "|"),
    ("semicolon", ";", "Semicolon", 186, ":"), ("apostrophe", "'", "Quote", 222, '"'),
    ("grave", "`", "Backquote", 192, "~"), ("comma", ",", "Comma", 188, "<"), ("period", ".", "Period", 190, ">"),
    ("slash", "/", "Slash", 191, "?"),
)
# Shifted characters typed by their own X11 names ("plus", "exclam", ...): the unshifted key with Shift.
_SHIFTED_NAMES = {
    "plus": "+", "underscore": "_", "exclam": "!", "at": "@", "numbersign": "#", "dollar": "$", "percent": "%",
    "asciicircum": "^", "ampersand": "&", "asterisk": "*", "parenleft": "(", "parenright": ")", "colon": ":",
    "quotedbl": '"', "less": "<", "greater": ">", "question": "?", "braceleft": "{", "braceright": "}", "bar": "|",
    "asciitilde": "~",
}
_DIGIT_SHIFTED = ")!@#$%^&*("

_BY_CHAR = {}
for _name, _char, _code, _key_code, _shifted in _PUNCTUATION:
    _NAMED[_name] = Key(_char, _code, _key_code, _char, _shifted, keysym=_name)
for _digit in "0123456789":
    _NAMED[_digit] = Key(_digit, f"Digit{_digit}", ord(_digit), _digit, _DIGIT_SHIFTED[int(_digit)], keysym=_digit)
for _letter in "abcdefghijklmnopqrstuvwxyz":
    _NAMED[_letter] = Key(_letter, f"Key{_letter.upper()}", ord(_letter.upper()), _letter, _letter.upper(),
                          keysym=_letter)
for _named in _NAMED.values():
    if _named.text and _named.text != "\r":
        _BY_CHAR[_named.text] = (_named, False)
        _BY_CHAR[_named.shifted] = (_named, True)


def combination(name):
    """The keys of one xdotool key name or combination ("ctrl+shift+t"), modifiers first; UnknownKey."""
    if name == "+":
        parts = ["plus"]
    elif name.endswith("++"):  # "ctrl++" names the plus key
        parts = [*name[:-2].split("+"), "plus"]
    else:
        parts = name.split("+")
    if "" in parts:  # "ctrl+", "+a": a modifier and nothing, or a stray '+'
        raise UnknownKey(f"key {name!r} has a '+' with no key beside it (the plus key is 'plus', as in 'ctrl+plus')")
    keys = []
    for part in parts:
        keys += _keys_of(part.replace("-", "minus") if part == "-" else part)
    return keys


def _keys_of(part):
    """A list: a shifted character named alone ("plus", "A") is Shift and its key."""
    lowered = part.lower()
    lowered = _ALIASES.get(lowered, lowered)
    if lowered in _MODIFIERS:
        return [_MODIFIERS[lowered]]
    if len(part) == 1 and part in _BY_CHAR:
        return typing(part)
    if lowered in _NAMED:
        return [_NAMED[lowered]]
    if lowered in _SHIFTED_NAMES:
        return typing(_SHIFTED_NAMES[lowered])
    raise UnknownKey(f"unknown key {part!r}")


def typing(char):
    """The keys that type `char` on a US layout (Shift and the key for a shifted one), or None."""
    found = _BY_CHAR.get(char)
    if found is None:
        return None
    key, shifted = found
    return [_MODIFIERS["shift"], key] if shifted else [key]


def modifiers_of(keys):
    """The modifiers bit mask of the modifier keys among `keys`."""
    mask = 0
    for key in keys:
        mask |= key.modifier
    return mask
