"""An HTTP form login driver: GET a login page, fill its form, follow redirects, keep the cookies.

No browser and no JavaScript: server-rendered HTML forms only, read with `html.parser` and sent with
`urllib` and a cookie jar (stdlib only; under gunicorn's gevent worker its sockets are cooperative).
Redirects are followed by hand (301/302/303 after a POST become a GET, 307/308 keep method and body) so
that every hop is checked against `allowed_hosts`. No proxy from the environment is used. Values a
person submits are never logged nor put into exceptions.

Classifying a page (heuristic but deterministic; the first rule that matches wins)

1. The login form is chosen among the page's forms in this order of preference:
   a. a form with a visible password input: fields `identifier` (the last visible text/email/tel input
      before the password), `password`, and any other visible text inputs as `text` fields
      (required only when they carry `required`);
   b. a form whose only visible fillable input looks like a code (its name, id, autocomplete
      (`one-time-code`), label, placeholder or aria-label mention otp, one-time, code, verification,
      passcode, token, 2fa/mfa/totp, or it has inputmode=numeric with a maxlength up to 10): one field,
      `totp_code` when its label mentions an authenticator app/TOTP (or, if its label names no channel
      such as SMS, text, email or phone, when the page does), else `code`; a `code` field whose words name
      a channel, or on a page saying the code was sent (texted, emailed, "we sent"), is `sent_by_site`;
   c. a form without visible fillable inputs whose submit buttons (two or more, or one whose label names
      an MFA channel) or radio inputs look like MFA methods (a label names a channel, or the page speaks of
      verification/two-factor): a "choice" of `mfa_method` choices. mfa_type from the label: push or
      notification or approve -> push, SMS/text message -> sms, call/voice -> call, email -> email,
      authenticator/app/TOTP -> totp, password -> password, else other. Cancel/back buttons are left out;
   d. a form whose only visible fillable input looks like an identifier (type email/tel, autocomplete
      username/email, or name/id/label mentioning user, email, login, account, identifier, phone) and is
      not a search box: one `identifier` field.
   The words that mark identifiers and codes live in app.auth_connections.meanings, which also says which
   kinds of identifier (email, username, phone) an identifier field takes (FieldSpec.accepts).
2. SSO buttons: links and submit buttons whose text reads "Sign in/Log in/Continue/Sign up with X"
   (or using/via X), or that carry data-provider, become `sso` entries (type `sso_provider`, id
   "sso:<provider>"). They never count as the login form's submit button nor as MFA choices.
3. With a login form the page is "form" (a, b, d) or "choice" (c), with `sso` beside it.
   Without one:
   - "external" when the page asks the person to act elsewhere (identity provider, approve on your
     phone, check your email...) or was reached by choosing an SSO entry; `message` is the page's
     heading and first paragraph;
   - "choice" when the page offers SSO entries only (the choices are those entries);
   - "error" when the final status is 400 or more, or the page shows an error element;
   - "success" when it was reached by submit(), choose() (not SSO) or check();
   - "error" otherwise (open() found no sign-in form; before giving up, open() follows up to two
     "Log in"/"Sign in" links).
4. website_error: the text of the first element with role="alert" or a class containing "error" that has
   text, whitespace-collapsed.

Ids are stable for the same page: a field's id is its input's name (else its id attribute, else
"field-N"); a choice's id is "<name>-<value>" of its button or radio (else a slug of its label); SSO ids
are "sso:<provider>". Duplicates get "-2", "-3"...
"""
import codecs
import http.client
import http.cookiejar
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urlencode, urljoin, urlparse, urlunparse

from app.auth_connections.meanings import CODE_HINT, IDENTIFIER_HINT, identifier_kinds, words

USER_AGENT = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/124.0 Safari/537.36 Lantern")
MAX_BODY = 4 * 1024 * 1024
REDIRECTS = {301, 302, 303, 307, 308}
LOGIN_LINK_HOPS = 2


@dataclass
class FieldSpec:
    """One input a person must provide."""

    id: str
    name: str
    type: str  # identifier | password | code | totp_code | text
    label: str
    required: bool = True
    html_type: str = "text"  # legacy discovered_fields type: text|email|password|tel|number|url|code|totp
    placeholder: str | None = None
    selector: str = ""
    input_mode: str | None = None  # text | email | tel | numeric (canonical Field.input_mode)
    accepts: tuple = ()  # the kinds of identifier an identifier field takes (app.auth_connections.meanings)
    sent_by_site: bool = False  # a code field whose code the site says it sent (SMS, email, call): no authenticator's


@dataclass
class ChoiceSpec:
    """One option a person can pick."""

    id: str
    type: str  # mfa_method | sso_provider | sign_in_method | other
    label: str
    mfa_type: str | None = None  # sms | call | email | totp | push | password | other
    description: str | None = None  # the masked destination shown in the label, e.g. "***-**42"
    selector: str = ""


@dataclass
class Page:
    """What the driver found after a request."""

    kind: str  # form | choice | external | success | error
    url: str
    fields: list[FieldSpec] = field(default_factory=list)
    choices: list[ChoiceSpec] = field(default_factory=list)
    sso: list[ChoiceSpec] = field(default_factory=list)
    website_error: str | None = None
    message: str | None = None
    status: int = 200  # the final HTTP status


class LoginError(Exception):
    """The site could not be used. `code`: host_not_allowed, unsupported_url, unreachable, timeout,
    too_many_redirects, bad_response, invalid_state, unknown_choice or missing_fields."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


# -- text helpers

def _collapse(text):
    return " ".join((text or "").split())


def _slug(text):
    return re.sub(r"[^a-z0-9]+", "-", (text or "").lower()).strip("-") or "option"


def _css_value(value):
    return value.replace("\\", "\\\\").replace('"', '\\"')


TOTP_HINT = re.compile(r"authenticator|totp|authentication app|verification app")
CHANNEL_HINT = re.compile(r"\b(sms|text|texted|email|e-mail|phone|call)\b")
SENT_HINT = re.compile(r"\b(texted|text message|sms|emailed|we (?:have |'ve )?(?:just )?(?:sent|called)|"
                       r"(?:was|been|is) sent|check your (?:email|inbox|phone|messages))\b")
SEARCH_HINT = re.compile(r" (q|query|search|s|keywords?) ")
VERIFY_PAGE = re.compile(r"verif|two[- ]factor|two[- ]step|2-step|multi[- ]factor|\bmfa\b|\b2fa\b|security code|"
                         r"one[- ]time|verify it")
CANCEL = re.compile(r"^(cancel|back|go back|not now|skip|close)$", re.I)
SSO_TEXT = re.compile(r"^(?:sign in|sign-in|signin|log in|log-in|login|continue|sign up)\s+(?:with|using|via)\s+(.+)$",
                      re.I)
LOGIN_LINK = re.compile(r"^(?:log ?in|sign ?in|log-in|sign-in)(?: to .*)?$", re.I)
EXTERNAL_TEXT = re.compile(
    r"identity provider|continue (?:signing in )?(?:in|on) (?:your|the)|approve (?:the |this )?"
    r"(?:sign[- ]?in|login|log[- ]in|request)|check your (?:phone|device|email|inbox)|push notification|"
    r"waiting for (?:your )?(?:approval|confirmation)|tap (?:yes|approve)|open the link", re.I)
MASKED = re.compile(r"[\w.+@()-]*\*{2,}[\w*.+@()-]*")
FILLABLE = {"text", "email", "password", "tel", "number", "url", "search", "textarea"}
LEGACY_TYPES = {"text", "email", "password", "tel", "number", "url"}


def _mfa_type(label):
    text = label.lower()
    for mfa_type, pattern in (("push", r"\bpush\b|notification|\bapprove\b|tap yes"),
                              ("sms", r"\bsms\b|text message|\btext\b|\btexted\b"),
                              ("call", r"\bcall\b|\bvoice\b"),
                              ("email", r"\be-?mail\b"),
                              ("totp", r"authenticator|\btotp\b|\bapp\b"),
                              ("password", r"\bpassword\b")):
        if re.search(pattern, text):
            return mfa_type
    return "other"


# -- parsing

class _Capture:
    """Text inside one element (nested elements of the same tag are counted so the right end tag closes it)."""

    def __init__(self, tag, attrs=None):
        self.tag, self.attrs, self.depth, self.parts = tag, attrs or {}, 1, []

    @property
    def text(self):
        return _collapse("".join(self.parts))


class _Form:
    def __init__(self, index, attrs):
        self.index, self.attrs, self.controls = index, attrs, []

    @property
    def method(self):
        return (self.attrs.get("method") or "get").lower()


class _Control:
    """An input, button, select or textarea, in document order."""

    def __init__(self, tag, attrs, form, hidden, wrap_label):
        self.tag, self.attrs, self.form, self.in_hidden = tag, attrs, form, hidden
        self.wrap_label = wrap_label
        self.capture = None  # button text / textarea content
        self.options = []  # select: [(attrs, capture)]
        self.label = ""

    @property
    def type(self):
        if self.tag == "input":
            return (self.attrs.get("type") or "text").lower()
        if self.tag == "button":
            return (self.attrs.get("type") or "submit").lower()
        return self.tag  # select, textarea

    @property
    def name(self):
        return self.attrs.get("name") or ""

    @property
    def value(self):
        if self.tag == "textarea":
            return "".join(self.capture.parts) if self.capture else ""
        if self.tag == "select":
            chosen = next((o for o in self.options if "selected" in o[0]), self.options[0] if self.options else None)
            if chosen is None:
                return ""
            return chosen[0]["value"] if chosen[0].get("value") is not None else chosen[1].text
        return self.attrs.get("value") or ""

    @property
    def visible(self):
        return not (self.in_hidden or self.type == "hidden" or "hidden" in self.attrs
                    or (self.attrs.get("aria-hidden") or "").lower() == "true")

    @property
    def disabled(self):
        return "disabled" in self.attrs

    @property
    def fillable(self):
        return self.type in FILLABLE and self.visible and not self.disabled and "readonly" not in self.attrs

    @property
    def is_submit(self):
        return (self.tag == "button" and self.type == "submit") or (self.tag == "input" and self.type in
                                                                    ("submit", "image"))

    @property
    def text(self):
        if self.tag == "button":
            return ((self.capture.text if self.capture else "") or _collapse(self.attrs.get("aria-label"))
                    or _collapse(self.attrs.get("value")))
        return _collapse(self.attrs.get("value") or self.attrs.get("aria-label") or self.attrs.get("alt")) or "Submit"

    @property
    def selector(self):
        tag = "input" if self.tag == "input" else self.tag
        if self.attrs.get("id"):
            return f'#{self.attrs["id"]}' if re.fullmatch(r"[A-Za-z][\w-]*", self.attrs["id"]) \
                else f'[id="{_css_value(self.attrs["id"])}"]'
        if self.name:
            sel = f'{tag}[name="{_css_value(self.name)}"]'
            if self.type in ("radio", "checkbox") or self.is_submit:
                sel += f'[value="{_css_value(self.attrs.get("value") or "")}"]'
            return sel
        if self.is_submit:
            return f'{tag}[type="submit"]'
        return f'{tag}[type="{self.type}"]'


class _Document(HTMLParser):
    """Forms and their controls, labels, links, error elements, headings, paragraphs and the page text."""

    SKIP = {"script", "style", "noscript", "template"}
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
    BLOCK = {"p", "div", "h1", "h2", "h3", "form", "ul", "ol", "table", "section", "main", "header", "footer"}

    def __init__(self, html_text):
        super().__init__(convert_charrefs=True)
        self.forms, self.controls, self.links, self.labels = [], [], [], []
        self.errors, self.headings, self.paragraphs, self.text_parts = [], [], [], []
        self.title = None
        self.base = None
        self._open = []
        self._form = None
        self._skip = 0
        self._select = None
        self.feed(html_text)
        self.close()
        self._finish()

    def _capture(self, tag, attrs=None):
        capture = _Capture(tag, attrs)
        self._open.append(capture)
        return capture

    def handle_starttag(self, tag, attrs):
        attrs = {k.lower(): (v if v is not None else "") for k, v in attrs}
        if tag in self.SKIP:
            self._skip += 1
            return
        if tag in self.BLOCK:  # an unclosed <p> ends where the next block starts
            self._open = [c for c in self._open if c.tag != "p"]
        if tag == "option":  # and an unclosed <option> where the next one starts
            self._open = [c for c in self._open if c.tag != "option"]
        if tag not in self.VOID:
            for capture in self._open:
                if capture.tag == tag:
                    capture.depth += 1
        hidden = any(c.attrs.get("#hidden") for c in self._open)
        if tag not in self.VOID and ("hidden" in attrs or re.search(r"display\s*:\s*none|visibility\s*:\s*hidden",
                                                                      attrs.get("style", ""))):
            self._capture(tag, {"#hidden": True})
        if tag == "form":
            self._form = _Form(len(self.forms), attrs)
            self.forms.append(self._form)
        elif tag in ("input", "button", "select", "textarea"):
            label = next((c for c in reversed(self._open) if c.tag == "label"), None)
            control = _Control(tag, attrs, self._form, hidden, label)
            self.controls.append(control)
            if tag in ("button", "textarea"):
                control.capture = self._capture(tag)
            if tag == "select":
                self._select = control
        elif tag == "option" and self._select is not None:
            self._select.options.append((attrs, self._capture(tag)))
        elif tag == "label":
            self.labels.append(self._capture(tag, attrs))
        elif tag == "a":
            self.links.append(self._capture(tag, attrs))
        elif tag == "title":
            self.title = self._capture(tag)
        elif tag in ("h1", "h2"):
            self.headings.append(self._capture(tag))
        elif tag == "p":
            self.paragraphs.append(self._capture(tag))
        elif tag == "base" and self.base is None and attrs.get("href"):
            self.base = attrs["href"]
        if tag not in self.VOID and (attrs.get("role", "").lower() == "alert"
                                     or "error" in attrs.get("class", "").lower()):
            self.errors.append(self._capture(tag, {"#hidden": False}))

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self._skip = max(0, self._skip - 1)
            return
        if tag == "form":
            self._form = None
        if tag == "select":
            self._select = None
            self._open = [c for c in self._open if c.tag != "option"]
        for capture in list(self._open):
            if capture.tag == tag:
                capture.depth -= 1
                if capture.depth == 0:
                    self._open.remove(capture)

    def handle_data(self, data):
        if self._skip:
            return
        for capture in self._open:
            capture.parts.append(data)
        self.text_parts.append(data)

    def _finish(self):
        by_id = {f.attrs.get("id"): f for f in self.forms if f.attrs.get("id")}
        for_labels = {}
        for label in self.labels:
            if label.attrs.get("for"):
                for_labels.setdefault(label.attrs["for"], label.text)
        for control in self.controls:
            if control.attrs.get("form") in by_id:
                control.form = by_id[control.attrs["form"]]
            if control.form is not None:
                control.form.controls.append(control)
            control.label = (for_labels.get(control.attrs.get("id") or "\0")
                             or (control.wrap_label.text if control.wrap_label else "")
                             or _collapse(control.attrs.get("aria-label"))
                             or _collapse(control.attrs.get("placeholder"))
                             or _collapse(control.attrs.get("title")))

    @property
    def text(self):
        return _collapse(" ".join(self.text_parts))

    @property
    def website_error(self):
        return next((c.text for c in self.errors if c.text), None)

    @property
    def message(self):
        heading = self.headings[0].text if self.headings else ""
        paragraph = self.paragraphs[0].text if self.paragraphs else ""
        if heading and paragraph:
            return heading + (" " if heading[-1] in ".!?:" else ": ") + paragraph
        return heading or paragraph or (self.title.text if self.title else "") or None


# -- classification

@dataclass
class _Action:
    """What choose() does for a choice id: follow a link, or submit a form with extra name=value pairs."""

    link: str | None = None
    form: _Form | None = None
    button: _Control | None = None
    extra: tuple = ()
    sso: bool = False


class _Ids:
    def __init__(self):
        self.seen = {}

    def __call__(self, wanted):
        count = self.seen.get(wanted, 0) + 1
        self.seen[wanted] = count
        return wanted if count == 1 else f"{wanted}-{count}"


def _sso_entries(doc):
    """SSO links and buttons: [(ChoiceSpec, _Action)], unique by provider."""
    found, seen = [], set()
    candidates = [(link, None) for link in doc.links] + [(c, c.form) for c in doc.controls if c.is_submit]
    for element, form in candidates:  # links, then buttons, each in document order
        attrs = element.attrs
        label = element.text if isinstance(element, _Control) else (element.text or _collapse(attrs.get("aria-label")))
        match = SSO_TEXT.match(label or "")
        provider = attrs.get("data-provider") or (match.group(1) if match else None)
        if not provider:
            continue
        if isinstance(element, _Control):
            if not element.visible or element.disabled:
                continue
            action, selector = _Action(form=form, button=element, sso=True), element.selector
        else:
            if not attrs.get("href") or attrs["href"].startswith(("#", "javascript:")):
                continue
            action = _Action(link=attrs["href"], sso=True)
            selector = (f'a[data-provider="{_css_value(attrs["data-provider"])}"]' if attrs.get("data-provider")
                        else f'a[href="{_css_value(attrs["href"])}"]')
        choice_id = "sso:" + _slug(provider)
        if choice_id in seen:
            continue
        seen.add(choice_id)
        found.append((ChoiceSpec(id=choice_id, type="sso_provider", label=label or provider, selector=selector),
                      action))
    return found


def _hints(control):
    """words() of how the page's author named an input (name, id), and of what a person reads beside it."""
    return (words(control.name, control.attrs.get("id")),
            words(control.label, control.attrs.get("placeholder"), control.attrs.get("aria-label")))


def _field(control, kind, ids, doc):
    html_type = {"code": "code", "totp_code": "totp"}.get(kind) or (
        control.type if control.type in LEGACY_TYPES else "text")
    input_mode = (control.attrs.get("inputmode") or "").lower()
    if input_mode not in ("text", "email", "tel", "numeric"):
        input_mode = {"email": "email", "tel": "tel", "number": "numeric"}.get(control.type)
        if kind in ("code", "totp_code"):
            input_mode = "numeric"
    named, shown = _hints(control)
    accepts = identifier_kinds(control.type, control.attrs.get("autocomplete"), named, shown) \
        if kind == "identifier" else ()
    sent_by_site = kind == "code" and bool(CHANNEL_HINT.search(named + shown) or SENT_HINT.search(doc.text.lower()))
    return FieldSpec(
        id=ids(control.name or control.attrs.get("id") or f"field-{control.form.controls.index(control) + 1}"),
        name=control.name, type=kind, label=control.label or control.name or kind,
        required=kind != "text" or "required" in control.attrs, html_type=html_type,
        placeholder=control.attrs.get("placeholder") or None, selector=control.selector, input_mode=input_mode,
        accepts=accepts, sent_by_site=sent_by_site)


def _is_code(control):
    hints = "".join(_hints(control))
    if (control.attrs.get("autocomplete") or "").lower() == "one-time-code" or CODE_HINT.search(hints):
        return True
    maxlength = control.attrs.get("maxlength") or ""
    return (control.attrs.get("inputmode") or "").lower() == "numeric" and maxlength.isdigit() \
        and int(maxlength) <= 10


def _is_identifier(control):
    hints = "".join(_hints(control))
    if control.type == "search" or SEARCH_HINT.fullmatch(words(control.name)) or "search" in hints:
        return False
    autocomplete = (control.attrs.get("autocomplete") or "").lower()
    return control.type in ("email", "tel") or any(w in autocomplete for w in ("username", "email")) \
        or bool(IDENTIFIER_HINT.search(hints))


def _password_form(form):
    fillable = [c for c in form.controls if c.fillable]
    password = next((c for c in fillable if c.type == "password"), None)
    if password is None:
        return None
    before = fillable[:fillable.index(password)]
    identifier = next((c for c in reversed(before) if c.type in ("text", "email", "tel", "number", "url")), None)
    kinds = {id(identifier): "identifier", id(password): "password"}
    return [(c, kinds.get(id(c), "text")) for c in fillable if c is password or c.type != "password"]


def _code_form(form, doc):
    fillable = [c for c in form.controls if c.fillable]
    if len(fillable) != 1 or fillable[0].type in ("password", "search", "textarea") or not _is_code(fillable[0]):
        return None
    control = fillable[0]
    own = control.label.lower()
    totp = bool(TOTP_HINT.search(own)) or (not CHANNEL_HINT.search(own) and bool(TOTP_HINT.search(doc.text.lower())))
    return [(control, "totp_code" if totp else "code")]


def _choice_form(form, doc, sso_buttons, ids):
    if any(c.fillable for c in form.controls):
        return None
    radios = [c for c in form.controls if c.type == "radio" and c.visible and not c.disabled]
    submits = [c for c in form.controls if c.is_submit and c.visible and not c.disabled and c not in sso_buttons]
    options = []
    if radios:
        button = submits[0] if submits else None
        for radio in radios:
            label = radio.label or radio.attrs.get("value") or radio.name
            options.append((radio, label, _Action(form=form, button=button, extra=((radio.name, radio.value),))))
    else:
        for button in submits:
            if CANCEL.match(button.text):
                continue
            options.append((button, button.text, _Action(form=form, button=button)))
    if not options:
        return None
    types = [_mfa_type(label) for _, label, _ in options]
    known = [t for t in types if t != "other"]
    if len(options) == 1 and not known:
        return None
    if not known and not VERIFY_PAGE.search(doc.text.lower()):
        return None
    choices = []
    for (control, label, action), mfa_type in zip(options, types, strict=True):
        wanted = _slug(f"{control.name}-{control.value}") if control.name and control.value else _slug(label)
        masked = MASKED.search(label)
        choices.append((ChoiceSpec(id=ids(wanted), type="mfa_method", label=label, mfa_type=mfa_type,
                                   description=masked.group(0) if masked else None, selector=control.selector),
                        action))
    return choices


def _identifier_form(form):
    fillable = [c for c in form.controls if c.fillable]
    if len(fillable) == 1 and fillable[0].type != "password" and _is_identifier(fillable[0]):
        return [(fillable[0], "identifier")]
    return None


def _classify(doc, url, status, mode):
    """(Page, the form to submit or None, {field id: its control}, {choice id: _Action})."""
    sso = _sso_entries(doc)
    sso_buttons = [a.button for _, a in sso if a.button is not None]
    actions = {c.id: a for c, a in sso}
    sso_specs = [c for c, _ in sso]
    error = doc.website_error
    for finder in ("password", "code", "choice", "identifier"):
        for form in doc.forms:
            if finder == "choice":
                choices = _choice_form(form, doc, sso_buttons, _Ids())
                if choices:
                    actions.update({c.id: a for c, a in choices})
                    page = Page(kind="choice", url=url, choices=[c for c, _ in choices], sso=sso_specs,
                                website_error=error, status=status)
                    return page, None, {}, actions
                continue
            found = {"password": _password_form, "code": lambda f: _code_form(f, doc),
                     "identifier": _identifier_form}[finder](form)
            if found:
                ids = _Ids()
                specs = [(_field(control, kind, ids, doc), control) for control, kind in found]
                page = Page(kind="form", url=url, fields=[spec for spec, _ in specs], sso=sso_specs,
                            website_error=error, status=status)
                return page, form, {spec.id: control for spec, control in specs}, actions
    return _formless_page(doc, url, status, mode, sso_specs, error), None, {}, actions


def _formless_page(doc, url, status, mode, sso_specs, error):
    """A page without a login form: external, SSO-only choice, error or success (rule 3 above)."""
    if status < 400 and (mode == "sso" or EXTERNAL_TEXT.search(doc.text)):
        return Page(kind="external", url=url, status=status,
                    message=doc.message or "Finish signing in with the identity provider.")
    if sso_specs:
        return Page(kind="choice", url=url, choices=sso_specs, sso=sso_specs, website_error=error, status=status)
    if status >= 400 or error:
        return Page(kind="error", url=url, website_error=error, status=status,
                    message=error or f"The site answered HTTP {status}.")
    if mode in ("submit", "choose", "check"):
        return Page(kind="success", url=url, status=status)
    return Page(kind="error", url=url, message="No sign-in form was found on this page.", status=status)


# -- HTTP

class _KeepAllResponses(urllib.request.HTTPErrorProcessor):
    """Return 3xx/4xx/5xx responses as they are: redirects are followed by FormLogin, one checked hop at a time."""

    def http_response(self, request, response):
        return response

    https_response = http_response


class FormLogin:
    """One login attempt (or health check) against one site, with its own cookie jar."""

    def __init__(self, *, allowed_hosts=None, timeout=10.0, max_redirects=10, never_in_url=()):
        """`never_in_url`: values (stored passwords) no form may send in a URL; what submit() puts into a
        password input joins them."""
        self.never_in_url = {value for value in never_in_url if value}
        self.allowed_hosts = None if allowed_hosts is None else (
            {self._normalize_host(h) for h in allowed_hosts if h} - {""})
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.jar = http.cookiejar.CookieJar()
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                   urllib.request.HTTPCookieProcessor(self.jar), _KeepAllResponses())
        self.page = None  # the last Page
        self._doc = None
        self._form = None
        self._field_controls = {}
        self._actions = {}
        self._mode = None

    # -- public

    def open(self, url):
        """GET the login page (following up to two "Log in" links when the page has no sign-in form)."""
        page = self._load("GET", url, None, "open")
        for _ in range(LOGIN_LINK_HOPS):
            if page.kind != "error" or page.status >= 400:
                break
            link = next((a.attrs["href"] for a in self._doc.links
                         if a.attrs.get("href") and LOGIN_LINK.match(a.text)), None)
            if link is None:
                break
            page = self._load("GET", self._resolve(link), None, "open")
        return page

    def submit(self, values):
        """Fill the current form (values by FieldSpec.id) and send it with its hidden inputs."""
        if self.page is None or self.page.kind != "form" or self._form is None:
            raise LoginError("invalid_state", "There is no form to submit on the current page.")
        filled, missing = {}, []
        for spec in self.page.fields:
            value = values.get(spec.id)
            if value in (None, "") and spec.required:
                missing.append(spec.id)
            filled[id(self._field_controls[spec.id])] = value or ""
            if spec.type == "password" and value:
                self.never_in_url.add(value)
        if missing:
            raise LoginError("missing_fields", "Missing values for: " + ", ".join(missing) + ".")
        sso_buttons = {id(a.button) for a in self._actions.values() if a.sso and a.button is not None}
        button = next((c for c in self._form.controls if c.is_submit and not c.disabled
                       and id(c) not in sso_buttons), None)
        return self._send_form(self._form, button, filled=filled, mode="submit")

    def choose(self, choice_id):
        """Press the button or follow the link of one of the current page's choices or SSO entries."""
        action = self._actions.get(choice_id)
        if self.page is None or action is None:
            raise LoginError("unknown_choice", f"There is no choice {choice_id!r} on the current page.")
        mode = "sso" if action.sso else "choose"
        if action.link is not None:
            return self._load("GET", self._resolve(action.link), None, mode)
        return self._send_form(action.form, action.button, extra=action.extra, mode=mode)

    def check(self, url):
        """GET url with the jar: "success" unless it shows a sign-in form, an error or an external step."""
        return self._load("GET", url, None, "check")

    def refresh(self):
        """GET the current page again (e.g. while waiting on an external approval)."""
        if self.page is None:
            raise LoginError("invalid_state", "No page has been opened.")
        return self._load("GET", self.page.url, None, self._mode)

    def cookies(self):
        """The jar as storage-state cookies (Playwright's shape)."""
        self.jar.clear_expired_cookies()
        result = []
        for cookie in self.jar:
            domain = cookie.domain
            if not cookie.domain_specified and domain.endswith(".local") and "." not in domain[:-6]:
                domain = domain[:-6]  # cookiejar files "localhost" cookies under "localhost.local"
            rest = {k.lower(): v for k, v in cookie._rest.items()}
            same_site = (rest.get("samesite") or "Lax").capitalize()
            result.append({"name": cookie.name, "value": cookie.value or "", "domain": domain, "path": cookie.path,
                           "expires": cookie.expires if cookie.expires is not None else -1,
                           "httpOnly": "httponly" in rest, "secure": bool(cookie.secure),
                           "sameSite": same_site if same_site in ("Strict", "Lax", "None") else "Lax"})
        return result

    def load_cookies(self, cookies):
        """Put storage-state cookies into the jar (for health checks and re-authentication)."""
        for c in cookies:
            domain = c.get("domain") or ""
            dotted = domain.startswith(".")
            if not dotted and "." not in domain:
                domain += ".local"
            expires = c.get("expires")
            expires = None if expires is None or expires < 0 else int(expires)
            rest = {"SameSite": c.get("sameSite") or "Lax"}
            if c.get("httpOnly"):
                rest["HttpOnly"] = None
            self.jar.set_cookie(http.cookiejar.Cookie(
                version=0, name=c["name"], value=c.get("value", ""), port=None, port_specified=False,
                domain=domain, domain_specified=dotted, domain_initial_dot=dotted,
                path=c.get("path") or "/", path_specified=True, secure=bool(c.get("secure")),
                expires=expires, discard=expires is None, comment=None, comment_url=None, rest=rest))

    # -- internals

    @staticmethod
    def _normalize_host(host):
        host = host.strip().lower().rstrip(".")
        if "://" in host:
            host = urlparse(host).hostname or ""
        for prefix in ("*.", ".", "www."):
            if host.startswith(prefix):
                host = host[len(prefix):]
        return host

    def _allowed(self, host):
        if self.allowed_hosts is None:
            return True
        return any(host == h or host.endswith("." + h) for h in self.allowed_hosts)

    def _resolve(self, href):
        base = self.page.url if self.page else ""
        if self._doc is not None and self._doc.base:
            base = urljoin(base, self._doc.base)
        return urljoin(base, href)

    def _send_form(self, form, button, filled=None, extra=(), mode="submit"):
        """Send `form` like a browser: its successful controls (values from `filled` by control identity),
        then `extra` pairs, then the pressed button's name=value."""
        filled = filled or {}
        pairs = []
        for control in form.controls:
            if control.disabled or not control.name or control.is_submit or control.type in ("button", "reset",
                                                                                                 "file"):
                continue
            if control.type in ("checkbox", "radio"):
                if "checked" in control.attrs and not any(name == control.name for name, _ in extra):
                    pairs.append((control.name, control.value or "on"))
                continue
            pairs.append((control.name, filled.get(id(control), control.value)))
        pairs.extend(extra)
        if button is not None and button.name:
            pairs.append((button.name, button.value))
        action = (button.attrs.get("formaction") if button is not None else None) or form.attrs.get("action") or ""
        method = ((button.attrs.get("formmethod") if button is not None else None) or form.method).lower()
        url = self._resolve(action)
        if method == "post":
            return self._load("POST", url, urlencode(pairs).encode(), mode)
        # A password in a query string ends up in URLs, logs and Referer headers: refuse.
        if any(control.type == "password" for control in form.controls):
            raise LoginError("password_in_url", "The login form sends the password in the URL (method GET); "
                                                "Lantern does not submit it.")
        if any(secret in value for _, value in pairs for secret in self.never_in_url):
            raise LoginError("password_in_url", "The form would send a password in the URL (method GET); "
                                                "Lantern does not submit it.")
        parts = urlparse(url)
        return self._load("GET", urlunparse(parts._replace(query=urlencode(pairs), fragment="")), None, mode)

    def _load(self, method, url, body, mode):
        status, final_url, html_text = self._fetch(method, url, body)
        self._doc = _Document(html_text)
        self.page, self._form, self._field_controls, self._actions = _classify(self._doc, final_url, status, mode)
        self._mode = mode
        return self.page

    def _fetch(self, method, url, body):
        referer = self.page.url if self.page else None
        for _ in range(self.max_redirects + 1):
            parts = urlparse(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise LoginError("unsupported_url", "Only http and https URLs can be opened.")
            host = parts.hostname.lower()
            if not self._allowed(host):
                raise LoginError("host_not_allowed", f"{host} is not one of the connection's allowed domains.")
            headers = {"User-Agent": USER_AGENT, "Accept-Language": "en-US,en;q=0.8",
                       "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"}
            if referer:
                headers["Referer"] = referer
            if body is not None:
                headers["Content-Type"] = "application/x-www-form-urlencoded"
                origin = urlparse(referer or url)
                headers["Origin"] = f"{origin.scheme}://{origin.netloc}"
            request = urllib.request.Request(url.split("#")[0], data=body, headers=headers, method=method)
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    status = response.status
                    location = response.headers.get("Location")
                    content_type = response.headers.get_content_type()
                    charset = _charset(response.headers.get_content_charset())
                    data = response.read(MAX_BODY) if status not in REDIRECTS else b""
            except TimeoutError:
                raise LoginError("timeout", f"{host} did not answer within {self.timeout:g} seconds.") from None
            except urllib.error.URLError as exc:
                reason = exc.reason
                if isinstance(reason, TimeoutError):
                    raise LoginError("timeout", f"{host} did not answer within {self.timeout:g} seconds.") from None
                raise LoginError("unreachable", f"Could not reach {host}: {_reason(reason)}.") from None
            except (http.client.HTTPException, OSError) as exc:
                raise LoginError("unreachable", f"Could not reach {host}: {_reason(exc)}.") from None
            if status in REDIRECTS and location:
                referer, url = url, urljoin(url, location)
                if status == 303 or (status in (301, 302) and method == "POST"):
                    method, body = "GET", None
                continue
            if content_type not in ("text/html", "application/xhtml+xml", "text/plain"):
                return status, url, ""
            return status, url, data.decode(charset, errors="replace")
        raise LoginError("too_many_redirects", f"More than {self.max_redirects} redirects.")


def _charset(name):
    try:
        return codecs.lookup(name or "utf-8").name
    except LookupError:
        return "utf-8"


def _reason(reason):
    """A short cause without any request data: the exception's class or OS error text."""
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    if isinstance(reason, str):
        return reason
    return type(reason).__name__
