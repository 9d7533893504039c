"""TOTP secrets and codes (RFC 6238 via pyotp)."""
import base64
from datetime import datetime, timedelta

import pytest

from app.core import clock

# RFC 6238 appendix B: seeds and 8-digit codes at fixed times.
SEEDS = {"SHA1": b"12345678901234567890", "SHA256": b"12345678901234567890123456789012",
         "SHA512": b"1234567890123456789012345678901234567890123456789012345678901234"}
VECTORS = [
    (59, {"SHA1": "94287082", "SHA256": "46119246", "SHA512": "90693936"}),
    (1111111109, {"SHA1": "07081804", "SHA256": "68084774", "SHA512": "25091201"}),
    (1111111111, {"SHA1": "14050471", "SHA256": "67062674", "SHA512": "99943326"}),
    (1234567890, {"SHA1": "89005924", "SHA256": "91819424", "SHA512": "93441116"}),
    (2000000000, {"SHA1": "69279037", "SHA256": "90698825", "SHA512": "38618901"}),
    (20000000000, {"SHA1": "65353130", "SHA256": "77737706", "SHA512": "47863826"}),
]
SECRET = "JBSWY3DPEHPK3PXPJBSWY3DP"


def at(unix_seconds):
    return datetime(1970, 1, 1) + timedelta(seconds=unix_seconds)


def b32(seed):
    return base64.b32encode(seed).decode().rstrip("=")


def credential(client, **fields):
    response = client.post("/credentials", json={"domain": "a.com", "name": "c", "values": {}, **fields})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


@pytest.mark.parametrize("algorithm", ["SHA1", "SHA256", "SHA512"])
def test_rfc_6238_vectors(client, algorithm):
    credential(client, totp_secret=b32(SEEDS[algorithm]), totp_algorithm=algorithm, totp_digits=8)
    for unix_seconds, codes in VECTORS:
        clock.freeze(at(unix_seconds))
        body = client.get("/credentials/c/totp-code").get_json()
        assert body["code"] == codes[algorithm], unix_seconds
        window_end = unix_seconds - unix_seconds % 30 + 30
        assert body["expires_at"] == clock.isoformat(at(window_end))


def test_create_with_a_secret_shows_the_current_code(client):
    clock.freeze(at(1111111111))
    created = credential(client, totp_secret=b32(SEEDS["SHA1"]), totp_digits=8)
    assert (created["totp_code"], created["totp_code_expires_at"]) == ("14050471", "2005-03-18T01:59:00.000000Z")
    assert (created["totp_algorithm"], created["totp_digits"], created["totp_period"]) == ("SHA1", 8, 30)
    assert created["has_totp_secret"] is True
    assert "totp_code" not in client.get("/credentials/c").get_json()


def test_custom_period(client):
    credential(client, totp_secret=SECRET, totp_period=60)
    clock.freeze(at(90))
    assert client.get("/credentials/c/totp-code").get_json()["expires_at"] == clock.isoformat(at(120))


def test_otpauth_uri_parameters_win(client):
    uri = f"otpauth://totp/Example:ada?secret={b32(SEEDS['SHA256'])}&issuer=Example&algorithm=SHA256&digits=8&period=30"
    created = credential(client, totp_secret=uri, totp_algorithm="SHA512", totp_digits=6)
    assert (created["totp_algorithm"], created["totp_digits"], created["totp_period"]) == ("SHA256", 8, 30)
    clock.freeze(at(59))
    assert client.get("/credentials/c/totp-code").get_json()["code"] == "46119246"


def test_raw_secret_rotation_keeps_metadata_and_a_new_uri_defaults_what_it_omits(client):
    credential(client, totp_secret=SECRET, totp_algorithm="SHA512", totp_digits=8, totp_period=60)
    rotated = client.patch("/credentials/c", json={"totp_secret": b32(SEEDS["SHA1"])}).get_json()
    assert (rotated["totp_algorithm"], rotated["totp_digits"], rotated["totp_period"]) == ("SHA512", 8, 60)
    assert len(rotated["totp_code"]) == 8
    from_uri = client.patch("/credentials/c", json={"totp_secret": f"otpauth://totp/x?secret={SECRET}"}).get_json()
    assert (from_uri["totp_algorithm"], from_uri["totp_digits"], from_uri["totp_period"]) == ("SHA1", 6, 30)


def test_metadata_alone_changes_an_existing_secret(client):
    credential(client, totp_secret=SECRET)
    changed = client.patch("/credentials/c", json={"totp_digits": 7}).get_json()
    assert changed["totp_digits"] == 7 and len(changed["totp_code"]) == 7


def test_empty_secret_removes_secret_and_metadata(client):
    credential(client, totp_secret=SECRET)
    cleared = client.patch("/credentials/c", json={"totp_secret": ""}).get_json()
    assert cleared["has_totp_secret"] is False
    assert (cleared["totp_algorithm"], cleared["totp_digits"], cleared["totp_period"]) == (None, None, None)
    assert "totp_code" not in cleared
    response = client.get("/credentials/c/totp-code")
    assert response.status_code == 400
    assert "no TOTP secret" in response.get_json()["message"]


def test_no_secret_is_400_with_a_clear_message(client):
    credential(client)
    response = client.get("/credentials/c/totp-code")
    assert response.status_code == 400 and "totp_secret" in response.get_json()["message"]
    assert client.patch("/credentials/c", json={"totp_period": 60}).status_code == 400
    assert client.get("/credentials/nope/totp-code").status_code == 404


@pytest.mark.parametrize("secret", ["not base32!!!!!!!!", "JBSWY3DP", "A" * 129, "otpauth://hotp/x?secret=" + SECRET,
                                    "otpauth://totp/x?issuer=nosecret", f"otpauth://totp/x?secret={SECRET}&digits=12",
                                    f"otpauth://totp/x?secret={SECRET}&algorithm=MD5"])
def test_invalid_secrets_are_400_on_create(client, secret):
    response = client.post("/credentials", json={"domain": "a.com", "name": "c", "values": {}, "totp_secret": secret})
    assert response.status_code == 400
    assert response.get_json()["details"][0]["field"] == "totp_secret"
    assert client.get("/credentials/c").status_code == 404


def test_secret_with_spaces_and_lowercase_is_accepted(client):
    created = credential(client, totp_secret="jbsw y3dp ehpk 3pxp")
    assert created["has_totp_secret"] is True


def test_sixteen_character_secrets_work_as_sites_issue_them(client):
    """80-bit secrets are below pyotp's default floor but still common; codes must match RFC 4226."""
    import hashlib
    import hmac
    import struct

    secret = "JBSWY3DPEHPK3PXP"
    credential(client, totp_secret=secret)
    clock.freeze(at(1234567890))
    key = base64.b32decode(secret)
    digest = hmac.new(key, struct.pack(">Q", 1234567890 // 30), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    expected = str((struct.unpack(">I", digest[offset:offset + 4])[0] & 0x7FFFFFFF) % 10**6).zfill(6)
    assert client.get("/credentials/c/totp-code").get_json()["code"] == expected


def test_an_empty_secret_on_create_or_with_settings_is_400(client):
    response = client.post("/credentials", json={"domain": "a.com", "name": "c", "values": {}, "totp_secret": ""})
    assert response.status_code == 400
    credential(client, totp_secret=SECRET)
    assert client.patch("/credentials/c", json={"totp_secret": "", "totp_digits": 8}).status_code == 400
    assert client.get("/credentials/c").get_json()["has_totp_secret"] is True
