"""Which text the computer API types: the app refuses the rest with a 400 before a host gets it
(app/browsers/computer_schemas.py), and a host checks again before typing anything (browserhost/keys.py), so
that a text is typed whole or not at all."""
import unicodedata


def untypable(text):
    """The first character of `text` no keyboard types (a control character other than a new line or a tab, or half
    of a surrogate pair), or None. Every other character is typed, headful as headless."""
    for char in text:
        category = unicodedata.category(char)
        if (category == "Cc" and char not in "\n\t") or category == "Cs":
            return char
    return None
