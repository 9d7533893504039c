"""TOTP secrets (RFC 6238): parsing what users paste, and the current code."""
import base64
import binascii
import calendar
import hashlib
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pyotp

from app.core.errors import bad_request

ALGORITHMS = {"SHA1": hashlib.sha1, "SHA256": hashlib.sha256, "SHA512": hashlib.sha512}
DEFAULT_ALGORITHM, DEFAULT_DIGITS, DEFAULT_PERIOD = "SHA1", 6, 30
DIGITS_RANGE = (6, 8)
PERIOD_RANGE = (1, 3600)
SECRET_LENGTH = (16, 128)


def normalize_base32(secret, field="totp_secret"):
    """Upper-case, without spaces or padding; 16..128 characters that decode as base32."""
    cleaned = secret.replace(" ", "").replace("-", "").upper().rstrip("=")
    if not SECRET_LENGTH[0] <= len(cleaned) <= SECRET_LENGTH[1]:
        raise bad_request(f"totp_secret must be {SECRET_LENGTH[0]} to {SECRET_LENGTH[1]} base32 characters "
                          "or an otpauth://totp/ URI.", field=field)
    try:
        base64.b32decode(cleaned + "=" * (-len(cleaned) % 8))
    except (binascii.Error, ValueError):
        raise bad_request("totp_secret is not valid base32 (letters A-Z and digits 2-7).", field=field) from None
    return cleaned


def parse_secret(value):
    """A raw base32 secret -> {"secret"}; an otpauth://totp/ URI -> its secret and the parameters it names."""
    if not value.lower().startswith("otpauth://"):
        return {"secret": normalize_base32(value), "from_uri": False}
    uri = urlparse(value)
    if uri.netloc.lower() != "totp":
        raise bad_request("Only otpauth://totp/ URIs are supported (not HOTP).", field="totp_secret")
    params = {k.lower(): v[-1] for k, v in parse_qs(uri.query).items()}
    if "secret" not in params:
        raise bad_request("The otpauth URI has no secret parameter.", field="totp_secret")
    parsed = {"secret": normalize_base32(params["secret"]), "from_uri": True}
    if "algorithm" in params:
        parsed["algorithm"] = params["algorithm"].upper()
    for name, key in (("digits", "digits"), ("period", "period")):
        if key in params:
            if not params[key].isdigit():
                raise bad_request(f"The otpauth URI's {key} must be a whole number.", field="totp_secret")
            parsed[name] = int(params[key])
    validate_metadata(parsed.get("algorithm"), parsed.get("digits"), parsed.get("period"), field="totp_secret")
    return parsed


def validate_metadata(algorithm, digits, period, field=None):
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise bad_request(f"TOTP algorithm must be one of {', '.join(ALGORITHMS)}.", field=field or "totp_algorithm")
    if digits is not None and not DIGITS_RANGE[0] <= digits <= DIGITS_RANGE[1]:
        raise bad_request(f"TOTP digits must be {DIGITS_RANGE[0]} to {DIGITS_RANGE[1]}.", field=field or "totp_digits")
    if period is not None and not PERIOD_RANGE[0] <= period <= PERIOD_RANGE[1]:
        raise bad_request(f"TOTP period must be {PERIOD_RANGE[0]} to {PERIOD_RANGE[1]} seconds.",
                          field=field or "totp_period")


class SiteTOTP(pyotp.TOTP):
    """pyotp refuses secrets under 112 bits (NIST's floor for new secrets), but the
    site chose the secret; 16 base32 characters (80 bits) are still common and the
    codes must match what the site expects."""

    def byte_secret(self):
        return base64.b32decode(self.secret + "=" * (-len(self.secret) % 8), casefold=True)


def code_at(secret, algorithm, digits, period, at):
    """The code valid at `at` (naive UTC) and when it expires."""
    epoch = calendar.timegm(at.timetuple())
    totp = SiteTOTP(secret, digits=digits, digest=ALGORITHMS[algorithm], interval=period)
    window_start = epoch - epoch % period
    expires_at = at.replace(microsecond=0) + timedelta(seconds=window_start + period - epoch)
    return totp.at(epoch), expires_at
