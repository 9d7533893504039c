"""Which Chrome enterprise policies a session may set (`chrome_policy` on create), and why some are refused.

The browser host writes them as the managed policy file of the session's sandbox, which its Chromium reads at
start (chrome://policy lists them). Like Kernel's API, Lantern takes any name shaped like a policy's: Chromium
ignores names it does not know and values of the wrong type (chrome://policy shows them as errors), and newer
Chromiums' policies need no change here. Refused, one 400 detail each (`chrome_policy.<Name>`), are the policies
or values that would take the session from Lantern; the effects named below were seen on Chromium 156.

The refusals keep sessions working as Lantern serves them. They are no wall against the session's own CDP
client, which drives its browser fully: the sandbox is that wall.
"""
import json
import re
from dataclasses import dataclass

MAX_BYTES = 5 * 1024 * 1024  # of the policies as compact JSON, as Kernel caps them
# Chromium's policy names: ASCII letters and digits, from a capital (URLBlocklist, Disable3DAPIs).
NAME = re.compile(r"^[A-Z][A-Za-z0-9]{0,99}$")


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
SANDBOX = ("Lantern keeps Chromium's own sandbox on inside the session's sandbox: with this, a page that took "
           "over that service would run unsandboxed beside the browser")
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
            "policies, at most 5 MiB as JSON. Refused with a 400 naming each (field chrome_policy.<Name>): a name "
            f"not shaped like a policy's; {'; '.join(refused)}.")


def rule_of_family(name):
    return next((rule for family, rule in FAMILIES.items() if name.startswith(family)), None)


def rule_for(name):
    return RULES.get(name) or rule_of_family(name)


def problems(policies, session=None):
    """{policy name, or None for the whole: what is wrong} for `policies` (a dict). Without `session`, the rules
    that hold for every session; with it (the create's settings), only those that depend on the session."""
    if session is None:
        size = len(json.dumps(policies, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_BYTES:
            return {None: f"{size} bytes as JSON, over the cap of {MAX_BYTES} (5 MiB)."}
    found = {}
    for name, value in policies.items():
        if not NAME.match(name):
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
