"""A small website with a login form, MFA steps and an SSO page, served on 127.0.0.1 for login-driver tests.

Users (change `site.users`): carol has no MFA, alice has an authenticator app (TOTP with `site.totp_secret`),
bob picks SMS (the code "texted" is appended to `site.sms_codes`) or the authenticator app; dana has an email
address and the authenticator app; erin is always texted a code. /login asks for an email or username and a
password; /login/email asks for an email address (a type="email" input named "email") and a password. Sessions
live in `site.sessions` (sid -> username); `site.expire_sessions()` logs everyone out.
"""
import html
import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, quote, urlparse

import pyotp

from tests.fakes import LocalServer

PAGE = ('<!doctype html><html><head><meta charset="utf-8"><title>{title} - Example</title></head>'
        '<body><header><a href="/">Example</a></header><main><h1>{title}</h1>{body}</main></body></html>')
HOME = '<p>Example keeps your notes.</p><p><a href="/login">Log in</a></p>'
ERROR = '<div class="error" role="alert">{}</div>'
LOGIN = """{error}<form method="post" action="/login">
<input type="hidden" name="csrf" value="{csrf}"><input type="hidden" name="next" value="{next}">
<label for="username">Email or username</label>
<input id="username" name="username" type="text" autocomplete="username" required>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<label><input type="checkbox" name="remember" value="1" checked> Remember me</label>
<button type="submit">Sign in</button>
</form>
<p>or</p>
<a class="sso" data-provider="google" href="/sso/google">Sign in with Google</a>"""
EMAIL_LOGIN = """{error}<form method="post" action="/login/email">
<input type="hidden" name="csrf" value="{csrf}">
<label for="email">Email address</label>
<input id="email" name="email" type="email" autocomplete="email" required>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>"""
CODE = """<p>{intro}</p>{error}<form method="post" action="{action}">
<label for="otp">{label}</label>
<input id="otp" name="otp" type="text" autocomplete="one-time-code" inputmode="numeric" maxlength="6">
<button type="submit">Verify</button>
</form>"""
CHOOSE = """<p>How do you want to verify it's you?</p><form method="post" action="/mfa/choose">
<button type="submit" name="method" value="sms">Text message (SMS) to ***-**42</button>
<button type="submit" name="method" value="totp">Authenticator app</button>
</form>"""
ACCOUNT = '<p>Welcome, {user}</p><p><a href="/logout">Log out</a></p>'
SSO = ("<p>Finish signing in with your Google account in the identity provider's window, "
       "then come back to this page.</p>")
TOTP_INTRO = "Open your authenticator app and enter the 6-digit code."
SMS_INTRO = "We texted a 6-digit code to ***-**42."


class LoginSite(LocalServer):
    """GET/POST routes in `routes`; each handler takes a `Request` and returns (status, html, headers)."""

    def __init__(self):
        super().__init__()
        self.totp_secret = "JBSWY3DPEHPK3PXPJBSWY3DP"
        self.users = {
            "carol": {"password": "carol-password", "mfa": None},
            "alice": {"password": "alice-password", "mfa": "totp"},
            "bob": {"password": "bob-password", "mfa": "choose"},
            "dana": {"password": "dana-password", "mfa": "totp", "email": "dana@example.test"},
            "erin": {"password": "erin-password", "mfa": "sms"},
        }
        self.csrf = secrets.token_urlsafe(8)
        self.sessions = {}      # sid cookie -> username (logged in)
        self.pending = {}       # mfa cookie -> {"user", "sms"} (password accepted, MFA to do)
        self.sms_codes = []     # every code "texted", newest last
        self.requests = []      # (method, path)
        self.routes = {
            ("GET", "/"): lambda req: page("Welcome", HOME),
            ("GET", "/login"): self.login_form,
            ("POST", "/login"): self.login,
            ("GET", "/login/email"): self.email_login_form,
            ("POST", "/login/email"): self.email_login,
            ("GET", "/mfa/choose"): self.choose_form,
            ("POST", "/mfa/choose"): self.choose,
            ("GET", "/mfa/totp"): self.totp_form,
            ("POST", "/mfa/totp"): self.totp,
            ("GET", "/mfa/sms"): self.sms_form,
            ("POST", "/mfa/sms"): self.sms,
            ("GET", "/account"): self.account,
            ("GET", "/logout"): self.logout,
            ("GET", "/sso/google"): lambda req: page("Continue with Google", SSO),
        }

    def expire_sessions(self):
        self.sessions.clear()

    # -- pages

    def login_form(self, req, error=None, next_path=None):
        next_path = next_path or req.query.get("next", "/account")
        body = LOGIN.format(error=ERROR.format(error) if error else "", csrf=self.csrf, next=html.escape(next_path))
        return page("Sign in", body)

    def email_login_form(self, req, error=None):
        return page("Sign in", EMAIL_LOGIN.format(error=ERROR.format(error) if error else "", csrf=self.csrf))

    def login(self, req):
        if req.form.get("csrf") != self.csrf:
            return page("Bad request", "<p>The form expired. Reload the page.</p>", status=400)
        name, password = req.form.get("username", ""), req.form.get("password", "")
        user = self.users.get(name)
        if user is None or user["password"] != password:
            return self.login_form(req, "Incorrect username or password.", req.form.get("next"))
        return self.password_accepted(name, req.form.get("next"))

    def email_login(self, req):
        if req.form.get("csrf") != self.csrf:
            return page("Bad request", "<p>The form expired. Reload the page.</p>", status=400)
        email, password = req.form.get("email", ""), req.form.get("password", "")
        name = next((n for n, u in self.users.items() if email and u.get("email") == email), None)
        if name is None or self.users[name]["password"] != password:
            return self.email_login_form(req, "Incorrect email address or password.")
        return self.password_accepted(name)

    def password_accepted(self, name, next_path=None):
        """Signed in, or on to the user's MFA step."""
        user = self.users[name]
        if not user.get("mfa"):
            return self.signed_in(name, next_path)
        token = secrets.token_urlsafe(16)
        self.pending[token] = {"user": name, "sms": self.text_a_code() if user["mfa"] == "sms" else None}
        return redirect(f"/mfa/{user['mfa']}", cookie=f"mfa={token}; HttpOnly; Path=/")

    def choose_form(self, req):
        return self.need_pending(req) or page("Verify it's you", CHOOSE)

    def choose(self, req):
        if refused := self.need_pending(req):
            return refused
        if req.form.get("method") == "sms":
            self.pending[req.cookies["mfa"]]["sms"] = self.text_a_code()
            return redirect("/mfa/sms")
        return redirect("/mfa/totp")

    def totp_form(self, req, error=None):
        body = CODE.format(intro=TOTP_INTRO, action="/mfa/totp", label="Code from your authenticator app",
                           error=ERROR.format(error) if error else "")
        return self.need_pending(req) or page("Two-step verification", body)

    def totp(self, req):
        if refused := self.need_pending(req):
            return refused
        if not pyotp.TOTP(self.totp_secret).verify(req.form.get("otp", ""), valid_window=1):
            return self.totp_form(req, "That code is not valid. Try again.")
        return self.signed_in(self.pending.pop(req.cookies["mfa"])["user"])

    def sms_form(self, req, error=None):
        body = CODE.format(intro=SMS_INTRO, action="/mfa/sms", label="Verification code",
                           error=ERROR.format(error) if error else "")
        return self.need_pending(req) or page("Two-step verification", body)

    def sms(self, req):
        if refused := self.need_pending(req):
            return refused
        expected = self.pending[req.cookies["mfa"]]["sms"]
        if not expected or req.form.get("otp") != expected:
            return self.sms_form(req, "That code is not valid. Try again.")
        return self.signed_in(self.pending.pop(req.cookies["mfa"])["user"])

    def account(self, req):
        user = self.sessions.get(req.cookies.get("sid"))
        if user is None:
            return redirect("/login?next=" + quote("/account"))
        return page("Your account", ACCOUNT.format(user=html.escape(user)))

    def logout(self, req):
        self.sessions.pop(req.cookies.get("sid"), None)
        return redirect("/", cookie="sid=; Max-Age=0; Path=/")

    # -- helpers

    def text_a_code(self):
        code = f"{secrets.randbelow(10**6):06d}"
        self.sms_codes.append(code)
        return code

    def need_pending(self, req):
        """None when an MFA step is under way (mfa cookie), else a redirect to the login form."""
        return None if req.cookies.get("mfa") in self.pending else redirect("/login")

    def signed_in(self, user, next_path=None):
        sid = secrets.token_urlsafe(16)
        self.sessions[sid] = user
        target = next_path if next_path and next_path.startswith("/") and not next_path.startswith("//") \
            else "/account"
        return redirect(target, cookie=f"sid={sid}; HttpOnly; Path=/")

    def get(self, handler):
        self.dispatch("GET", handler)

    def post(self, handler):
        self.dispatch("POST", handler)

    def dispatch(self, method, handler):
        self.requests.append((method, handler.path))
        url = urlparse(handler.path)
        route = self.routes.get((method, url.path))
        status, body, headers = route(Request(handler, url)) if route else page("Not found", "", status=404)
        data = body.encode()
        handler.send_response(status)
        for name, value in [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(data))),
                            *headers]:
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)


class Request:
    """What a route needs: query and form values (first of each), cookies."""

    def __init__(self, handler, url):
        self.query = {k: v[0] for k, v in parse_qs(url.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length).decode() if length else ""
        self.form = {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
        jar = SimpleCookie(handler.headers.get("Cookie", ""))
        self.cookies = {k: morsel.value for k, morsel in jar.items()}


def page(title, body, status=200):
    return status, PAGE.format(title=html.escape(title), body=body), []


def redirect(location, cookie=None):
    return 302, "", [("Location", location)] + ([("Set-Cookie", cookie)] if cookie else [])
