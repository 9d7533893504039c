"""Which Chrome enterprise policies a session may set (`chrome_policy` on create), and why some are refused.

The browser host writes them as the managed policy file of the session's sandbox, which its Chromium reads at
start (chrome://policy lists them). Like Kernel's API, Lantern takes any name shaped like a policy's: Chromium
ignores names it does not know and values of the wrong type (chrome://policy shows them as errors), and newer
Chromiums' policies need no change here. Refused, one 400 detail each (`chrome_policy.<Name>`), are the policies
or values that would take the session from Lantern, or have Chromium run a program or load a library of the
session's choosing; the effects named below were seen on Chromium 156.

The refusals keep sessions working as Lantern serves them. They are no wall against the session's own CDP
client, which drives its browser fully: the sandbox is that wall (it runs no program that opens files or links
either: browserhost/sandbox.py).
"""
import json
import re
from dataclasses import dataclass

MAX_BYTES = 5 * 1024 * 1024  # of the policies as compact JSON, as Kernel caps them
# Chromium 156 knows about 640 policies. Chromium reads every name it is given: 400,000 unknown ones (within
# 5 MiB) took its start 102 s, past the host's deadline, and the app 8.5 s to check them.
MAX_NAMES = 1000
# Chromium's policy names: ASCII letters and digits, from a capital (URLBlocklist, Disable3DAPIs). Matched whole
# (fullmatch): `$` also matches before a final newline, and "RemoteDebuggingAllowed\n" would escape its rule.
NAME = re.compile(r"[A-Z][A-Za-z0-9]{0,99}")


@dataclass(frozen=True)
class Rule:
    """A policy refused for `reason`: whatever its value, or only outside the values in `accepted`; with `when`,
    only for a session whose create setting of that name is true."""

    reason: str
    accepted: tuple = ()
    when: str | None = None

    def refuses(self, value):
        # By JSON type too: true is not 1 here, as it is not for Chromium.
        return not any(type(value) is type(good) and value == good for good in self.accepted)

    def accepted_shown(self):
        return " or ".join(json.dumps(value) for value in self.accepted)

    def message(self):
        if not self.accepted:
            return f"Refused: {self.reason}."
        where = f"in {SESSIONS[self.when]}" if self.when else "here"
        return f"Only {self.accepted_shown()} is accepted {where}: {self.reason}."


AUTOMATION = ("Lantern, its capture and every client of the session drive the browser over CDP (DevTools' "
              "remote debugging), which this would close")
EXTENSIONS = ("the session's extensions are its `extensions`, which Lantern loads itself: an extension policy "
              "could keep them from loading, or install others behind the session's back")
PROXY = ("the session's proxy is its `proxy` setting; a policy's proxy would carry the session's traffic, and "
         "the names it looks up, past the browser's allowlist rules and the session's resolver")
DNS = ("each session looks names up through a resolver of its own, which answers only the names of its "
       "network allowlist and never an address its firewall closes; DNS over HTTPS would look them up past it")
START = "the browser would open no tab (or window) that CDP can use, so the session could not start"
SANDBOX = ("false runs this service of Chromium's outside Chromium's own sandbox where a build sandboxes it by "
           "default, and Lantern leaves the browser no less isolated than its build makes it (Debian's Chromium 156 "
           "runs it unsandboxed unless this is true, which is taken)")
OPENS = ("Chromium would open files or links with the programs the system names for them, without asking; inside "
         "the session's sandbox the session names them (a page can download a .desktop file and the "
         "mimeapps.list that picks it), so a program of the session's would run beside the browser and its "
         "DevTools. Lantern's sandbox opens nothing outside the browser")
PROGRAMS = ("Legacy Browser Support runs a program of the policy's choosing, with the URL, inside the session's "
            "sandbox (next to the browser's DevTools, past Lantern's relay) and takes the page away from the "
            "browser")

# Every policy whose name starts so: each family is Lantern's to manage as a whole.
FAMILIES = {"Extension": Rule(EXTENSIONS), "Proxy": Rule(PROXY), "DnsOverHttps": Rule(DNS),
            "BrowserSwitcher": Rule(PROGRAMS), "AlternativeBrowser": Rule(PROGRAMS)}
RULES = {
    # CDP and automation.
    "RemoteDebuggingAllowed": Rule(AUTOMATION, accepted=(True,)),
    # 1 lets DevTools (and CDP) reach force-installed extensions, as Kernel's docs show; 2 turns both off.
    "DeveloperToolsAvailability": Rule(AUTOMATION, accepted=(0, 1)),
    "DeveloperToolsDisabled": Rule(AUTOMATION, accepted=(False,)),
    "DeveloperToolsAvailabilityBlocklist": Rule(AUTOMATION),  # CDP cannot attach to the pages it lists
    "ChromeForTestingAllowed": Rule("false keeps a Chrome for Testing build, which a host may run "
                                    "(BROWSER_CHROMIUM_PATH), from starting", accepted=(True,)),
    "WebDriverOverridesIncompatiblePolicies": Rule("an automation policy (chromedriver's), refused as Kernel "
                                                   "refuses it"),
    # Extensions beside the Extension* family.
    "BlockExternalExtensions": Rule(EXTENSIONS),
    # The network: only "off" leaves name lookups to the session's resolver.
    "DnsOverHttpsMode": Rule(DNS, accepted=("off",)),
    # The start: no tab in the default context (where the profile and Playwright's first pages are), or none.
    "IncognitoModeAvailability": Rule(START + " (2 forces incognito windows)", accepted=(0, 1)),
    "BrowserGuestModeEnforced": Rule(START, accepted=(False,)),
    "BrowserSignin": Rule(START + " (2 forces a sign-in first)", accepted=(0, 1)),
    "ForceBrowserSignin": Rule(START, accepted=(False,)),
    "HeadlessMode": Rule("2 keeps a headless browser from starting", accepted=(1,), when="headless"),
    "FullscreenAllowed": Rule("a kiosk is a full-screen window: with false, Chromium shows its tab strip and "
                              "toolbar after all", accepted=(True,), when="kiosk_mode"),
    "CloudManagementEnrollmentToken": Rule("it enrolls the browser with a management server, whose policies "
                                           "would apply on top of these, the refused ones too"),
    # Programs: a download of these types, or a link to these schemes, opened without the user's say.
    "AutoOpenFileTypes": Rule(OPENS),
    "AutoOpenAllowedForURLs": Rule(OPENS),
    "AutoLaunchProtocolsFromOrigins": Rule(OPENS),
    # Seen with upstream and Chrome for Testing builds, which BROWSER_CHROMIUM_PATH may name.
    "GSSAPILibraryName": Rule("Chromium would load the library it names into its network service, outside "
                              "Chromium's sandbox, and a session can supply that file (an extension's)"),
    # The sandbox.
    "AudioSandboxEnabled": Rule(SANDBOX, accepted=(True,)),
    "NetworkServiceSandboxEnabled": Rule(SANDBOX, accepted=(True,)),
}


SESSIONS = {"headless": "a headless session", "kiosk_mode": "a kiosk"}


def described():
    """What the OpenAPI document says of the field: the cap and every refusal, from the tables above."""
    families = [name for name, rule in RULES.items() if rule.accepted and rule_of_family(name)]
    refused = [f"every policy named {', '.join(f'{family}*' for family in FAMILIES)}"
               + "".join(f" but {name} {RULES[name].accepted_shown()}" for name in families)]
    for name, rule in RULES.items():
        if name not in families:
            refused.append(f"{name} but {rule.accepted_shown()}" if rule.accepted else name)
            refused[-1] += f" in {SESSIONS[rule.when]}" if rule.when else ""
    return ("Chrome enterprise policies by name (https://chromeenterprise.google/policies/): the browser's managed "
            f"policies, at most {MAX_NAMES:,} of them and 5 MiB as JSON. Refused with a 400 naming each (field "
            f"chrome_policy.<Name>): a name not shaped like a policy's; {'; '.join(refused)}.")


def too_many(policies):
    """What is wrong with the number of `policies`, or None: checked before anything else looks at each."""
    if len(policies) > MAX_NAMES:
        return f"{len(policies)} policies, over the cap of {MAX_NAMES} (Chromium knows about 640)."
    return None


def rule_of_family(name):
    return next((rule for family, rule in FAMILIES.items() if name.startswith(family)), None)


def rule_for(name):
    return RULES.get(name) or rule_of_family(name)


def problems(policies, session=None):
    """{policy name, or None for the whole: what is wrong} for `policies` (a dict). Without `session`, the rules
    that hold for every session; with it (the create's settings), only those that depend on the session."""
    if session is None:
        crowded = too_many(policies)
        if crowded:
            return {None: crowded}
        size = len(json.dumps(policies, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_BYTES:
            return {None: f"{size} bytes as JSON, over the cap of {MAX_BYTES} (5 MiB)."}
    found = {}
    for name, value in policies.items():
        if not NAME.fullmatch(name):
            if session is None:
                shown = name if len(name) <= 100 else name[:100] + "…"
                found[shown] = "Not a Chrome policy name: letters and digits from a capital, as in URLBlocklist."
            continue
        rule = rule_for(name)
        if rule is None or (rule.when is None) != (session is None):
            continue
        if (rule.when is None or session.get(rule.when)) and rule.refuses(value):
            found[name] = rule.message()
    return found
