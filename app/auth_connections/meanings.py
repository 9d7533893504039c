"""What a login form's fields and a credential's values mean: the one rule by which a credential fills a form,
a prompt asks only for what it lacks, and a submit's keys find their fields.

A field means an identifier, a password, a one-time code or other text (the form driver's field types). An
identifier field takes an email address, a username or a phone number: those its HTML type names (email, tel),
else those its words name (name, id, label, placeholder); a field whose words name none of them, or only say
"login", "account" or "user", takes any. A credential value means what its key says, whatever the spelling
("email", "E-mail", "emailAddress"; "username", "user_id", "login"; "password", "pwd"); a username that is an
email address also counts as an email, so a saved login fills an email field (an email never fills a field
asking for a username only). The one-time code comes from the credential's TOTP secret. Any other value fills
the field of that name or label. A field whose input is named after a value's key takes that value, whatever
either means.
"""
import re

IDENTIFIER, PASSWORD, CODE = "identifier", "password", "code"
EMAIL, USERNAME, PHONE = "email", "username", "phone"
# The order in which a field taking several kinds of identifier is filled (a username first, as before).
IDENTIFIER_KINDS = (USERNAME, EMAIL, PHONE)
CODE_TYPES = ("code", "totp_code")  # the driver's one-time code fields

# Words in a field's name, id, label or placeholder (as words() spells them), by what they ask for.
FIELD_WORDS = {
    EMAIL: ("email", "e mail", "mail"),
    PHONE: ("phone", "mobile", "telephone", "tel"),
    USERNAME: ("username", "user name", "userid", "user id", "uid"),
    IDENTIFIER: ("user", "login", "account", "identifier", "member", "customer"),  # any kind of identifier
    CODE: ("otp", "one time", "one time code", "code", "verification", "verify", "passcode", "token", "2fa",
           "mfa", "totp", "pin", "security code", "sms code"),
}
# Keys of credential values and of submitted answers, as compact() spells them, by meaning.
KEY_MEANINGS = {
    **dict.fromkeys(("email", "mail", "emailaddress", "mailaddress", "useremail", "loginemail", "accountemail"),
                    EMAIL),
    **dict.fromkeys(("phone", "phonenumber", "mobile", "mobilenumber", "tel", "telephone", "cell"), PHONE),
    **dict.fromkeys(("username", "user", "userid", "uid", "login", "loginname", "loginid", "userlogin",
                     "identifier", "account", "accountname", "accountid", "handle"), USERNAME),
    **dict.fromkeys(("password", "pass", "passwd", "pwd", "passphrase", "userpassword", "loginpassword",
                     "currentpassword"), PASSWORD),
    **dict.fromkeys(("code", "otp", "totp", "otpcode", "totpcode", "onetimecode", "onetimepassword", "mfa",
                     "mfacode", "2fa", "2facode", "verificationcode", "securitycode", "passcode", "smscode"), CODE),
}
ADDRESS = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def words(*parts):
    """Lower-case words of names and labels, padded with spaces: camelCase, snake_case and kebab-case split."""
    text = " ".join(p for p in parts if p)
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return " " + re.sub(r"[^a-z0-9*@]+", " ", text.lower()) + " "


def compact(text):
    return words(text).replace(" ", "")


def _mentions(meaning):
    return re.compile(" (" + "|".join(FIELD_WORDS[meaning]) + ") ")


MENTIONS = {meaning: _mentions(meaning) for meaning in FIELD_WORDS}
IDENTIFIER_HINT = re.compile(" (" + "|".join(w for m in (EMAIL, PHONE, USERNAME, IDENTIFIER)
                                               for w in FIELD_WORDS[m]) + ") ")
CODE_HINT = MENTIONS[CODE]


def identifier_kinds(html_type, autocomplete, hints):
    """What an identifier field takes (some of IDENTIFIER_KINDS), from its type and its words()."""
    autocomplete = (autocomplete or "").lower().split()
    if html_type == "email" or "email" in autocomplete:
        return (EMAIL,)
    if html_type == "tel" or "tel" in autocomplete:
        return (PHONE,)
    named = tuple(kind for kind in IDENTIFIER_KINDS if MENTIONS[kind].search(hints))
    return named or IDENTIFIER_KINDS


def key_meaning(key):
    """EMAIL, PHONE, USERNAME, PASSWORD or CODE for a value's key, else None."""
    return KEY_MEANINGS.get(compact(key))


def is_email_address(value):
    return bool(ADDRESS.fullmatch(value.strip()))


class Stored:
    """A credential's values sorted by meaning, to fill a page's fields."""

    def __init__(self, values, one_time_code=None):
        """`values`: the credential's values ({key: value}); `one_time_code`: a callable giving the TOTP code
        now, or None without a secret."""
        self.values = {key: value for key, value in values.items() if isinstance(value, str) and value}
        self.by_name = {compact(key): value for key, value in self.values.items()}
        self.one_time_code = one_time_code
        named, derived = {}, {}
        for key, value in self.values.items():
            meaning = key_meaning(key)
            if meaning in (EMAIL, PHONE, USERNAME, PASSWORD):
                named.setdefault(meaning, value)
            if meaning == USERNAME and is_email_address(value):
                derived.setdefault(EMAIL, value)
        self.by_meaning = {**derived, **named}  # an email named as such wins over a username that is one

    def fill(self, fields):
        """{field id: value} for the fields (the driver's FieldSpecs) these values answer."""
        filled = {}
        for field in fields:
            value = self.value_for(field)
            if value:
                filled[field.id] = value
        return filled

    def value_for(self, field):
        for name in (field.name, field.id):
            if name and compact(name) in self.by_name:
                return self.by_name[compact(name)]
        if field.type == IDENTIFIER:
            accepts = field.accepts or IDENTIFIER_KINDS
            return next((self.by_meaning[kind] for kind in accepts if kind in self.by_meaning), None)
        if field.type == PASSWORD:
            return self.by_meaning.get(PASSWORD)
        if field.type in CODE_TYPES:
            return self.one_time_code() if self.one_time_code else None
        return self.by_name.get(compact(field.label)) if field.label else None


def field_for_key(key, fields):
    """The id of the prompt field (canonical dicts: id, ref, type) a submitted key names: its id, else its
    input's name, else the one field of the key's meaning; None when none does."""
    for member in ("id", "ref"):
        named = [f["id"] for f in fields if f.get(member) == key]
        if named:
            return named[0]
    meaning = key_meaning(key)
    if meaning in (EMAIL, PHONE, USERNAME):
        meaning = IDENTIFIER
    group = [f["id"] for f in fields if f["type"] == meaning or (meaning == CODE and f["type"] in CODE_TYPES)]
    return group[0] if len(group) == 1 else None
