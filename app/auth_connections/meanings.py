"""What a login form's fields and a credential's values mean: the one rule by which a credential fills a form,
a prompt asks only for what it lacks, and a submit's keys find their fields.

A field means an identifier, a password, a one-time code or other text (the form driver's field types). An
identifier field takes an email address, a username or a phone number: those its HTML type names (email, tel),
else those its words name (name, id, label, placeholder); a label's general word ("Email or login", "Email or
member ID") adds a username after them; a field whose words name no kind takes any.

A credential value means what its key says, whatever the spelling ("email", "E-mail", "emailAddress";
"username", "user_id", "login"; "password", "pwd"); of several keys of one meaning the most specific fills the
field (KEYS lists them in that order). A username that is an email address or a phone number also counts as
one, after a value named so: what save_credentials and provider items keep is a `username`. The one-time code
comes from the credential's TOTP secret, and only into a field that may be an authenticator's.

A value also fills the field its key names (input name or id; a text field's label), but only where its meaning
fits: a password only into a password input, a code only into a code field, an identifier only into a field
taking that kind (or a text field); a key of no known meaning (`company_id`) fills whatever field it names.
"""
import re

IDENTIFIER, PASSWORD, CODE, TEXT = "identifier", "password", "code", "text"
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
# Keys of credential values and of submitted answers, as compact() spells them, by meaning, the most specific
# first: of two values of one meaning, the key listed first fills the field. An account number is no username:
# it fills the input named after it.
KEYS = {
    EMAIL: ("email", "emailaddress", "mail", "mailaddress", "loginemail", "useremail", "accountemail"),
    PHONE: ("phone", "phonenumber", "mobile", "mobilenumber", "cell", "tel", "telephone"),
    USERNAME: ("username", "loginname", "user", "userid", "uid", "login", "loginid", "userlogin", "identifier",
               "handle"),
    PASSWORD: ("password", "currentpassword", "loginpassword", "userpassword", "passwd", "pass", "pwd",
               "passphrase"),
    CODE: ("otp", "code", "totp", "otpcode", "totpcode", "onetimecode", "onetimepassword", "mfa", "mfacode", "2fa",
           "2facode", "verificationcode", "securitycode", "passcode", "smscode"),
}
KEY_MEANINGS = {key: meaning for meaning, keys in KEYS.items() for key in keys}
KEY_RANKS = {key: rank for keys in KEYS.values() for rank, key in enumerate(keys)}
ADDRESS = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
PHONE_NUMBER = re.compile(r"\+?[0-9 ().-]+")


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
# A general word that names an identifier of its own ("Email or login"), not one before a kind it qualifies
# ("Login email", "Account email or phone").
GENERAL_IDENTIFIER = re.compile(" (" + "|".join(FIELD_WORDS[IDENTIFIER]) + ") (?!(" + "|".join(
    w for kind in IDENTIFIER_KINDS for w in FIELD_WORDS[kind]) + ") )")


def identifier_kinds(html_type, autocomplete, named, shown):
    """What an identifier field takes (some of IDENTIFIER_KINDS), from its HTML type, its autocomplete and
    words(): `named` of its input's name and id, `shown` of what a person reads (label, placeholder, aria-label).

    Only what is shown adds a username for a general word: input names like userEmail or loginEmail say nothing
    about what the field takes besides the email.
    """
    autocomplete = (autocomplete or "").lower().split()
    if html_type == "email" or "email" in autocomplete:
        return (EMAIL,)
    if html_type == "tel" or "tel" in autocomplete:
        return (PHONE,)
    named_kinds = tuple(kind for kind in IDENTIFIER_KINDS if MENTIONS[kind].search(named + shown))
    if not named_kinds:
        return IDENTIFIER_KINDS
    if USERNAME not in named_kinds and GENERAL_IDENTIFIER.search(shown):
        return (*named_kinds, USERNAME)  # after the kinds named: "Email or login" is filled with an email first
    return named_kinds


def key_meaning(key):
    """EMAIL, PHONE, USERNAME, PASSWORD or CODE for a value's key, else None."""
    return KEY_MEANINGS.get(compact(key))


def is_email_address(value):
    return bool(ADDRESS.fullmatch(value.strip()))


def is_phone_number(value):
    """Digits with a leading + and the spaces, dots, dashes and brackets people write, 7 to 15 digits (E.164)."""
    return bool(PHONE_NUMBER.fullmatch(value.strip())) and 7 <= sum(c.isdigit() for c in value) <= 15


def kinds_of(meaning, value):
    """The kinds of identifier a value of that meaning is: a username may also be an address or a phone number."""
    if meaning != USERNAME:
        return {meaning}
    return {USERNAME} | ({EMAIL} if is_email_address(value) else set()) | ({PHONE} if is_phone_number(value)
                                                                           else set())


def fits(meaning, value, field):
    """Whether a value of that meaning may go into the field (a FieldSpec) that its key names."""
    if meaning is None:
        return True  # a value of its own (company_id): the site named the field after it
    if field.type == IDENTIFIER:
        return bool(kinds_of(meaning, value) & set(field.accepts or IDENTIFIER_KINDS))
    if field.type == TEXT:
        return meaning in IDENTIFIER_KINDS
    if field.type == PASSWORD:
        return meaning == PASSWORD
    return meaning == CODE and field.type in CODE_TYPES


def may_be_authenticator_code(field):
    """A one-time code field the credential's TOTP secret may answer: not one the site says it sent."""
    return field.type == "totp_code" or (field.type == "code" and not field.sent_by_site)


class CredentialValues:
    """A credential's values (under the keys their owner chose) and its one-time codes, to fill a page's fields.

    `one_time_code`: a callable giving the TOTP code now, None without a secret.
    """

    def __init__(self, values, one_time_code=None):
        self.values = {key: value for key, value in sorted(values.items()) if isinstance(value, str) and value}
        self.one_time_code = one_time_code
        self.keys = {compact(key): key for key in self.values}
        ranked = sorted(self.values, key=lambda key: (KEY_RANKS.get(compact(key), 0), key))
        self.of_meaning = {meaning: [self.values[k] for k in ranked if key_meaning(k) == meaning] for meaning in KEYS}
        for value in self.of_meaning[USERNAME]:  # after the values named so
            for kind in kinds_of(USERNAME, value) - {USERNAME}:
                self.of_meaning[kind].append(value)

    @property
    def passwords(self):
        """The values that are passwords (what must never go into a URL)."""
        return list(self.of_meaning[PASSWORD])

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
            named = self.named(name, field)
            if named:
                return named
        if field.type == IDENTIFIER:
            return next((self.of_meaning[kind][0] for kind in field.accepts or IDENTIFIER_KINDS
                         if self.of_meaning[kind]), None)
        if field.type == PASSWORD:
            return next(iter(self.of_meaning[PASSWORD]), None)
        if field.type in CODE_TYPES:
            return self.one_time_code() if self.one_time_code and may_be_authenticator_code(field) else None
        return self.named(field.label, field)

    def named(self, name, field):
        """The value whose key is `name`, if it may go into the field."""
        key = self.keys.get(compact(name)) if name else None
        if key is None or not fits(key_meaning(key), self.values[key], field):
            return None
        return self.values[key]


def field_for_key(key, fields):
    """The id of the field (canonical dicts: id, ref, type) a submitted key names: its id, else its input's name,
    else the one field of the key's meaning; None when none does."""
    for member in ("id", "ref"):
        named = [f["id"] for f in fields if f.get(member) == key]
        if named:
            return named[0]
    meaning = key_meaning(key)
    if meaning in (EMAIL, PHONE, USERNAME):
        meaning = IDENTIFIER
    group = [f["id"] for f in fields if f["type"] == meaning or (meaning == CODE and f["type"] in CODE_TYPES)]
    return group[0] if len(group) == 1 else None
