"""ZIP archives written byte by byte, for the extension tests: entries that lie about their
sizes, deflate bombs zipfile would take seconds to produce, end records that lie about counts."""
import struct
import zipfile
import zlib

MIB = 1024 * 1024


def handmade_zip(entries, *, declared_count=None):
    """A ZIP of (name, method, payload, crc, declared_size) entries; both headers declare
    `declared_size`, and the end record `declared_count` entries (the truth by default)."""
    local, central = bytearray(), bytearray()
    for name, method, payload, crc, declared_size in entries:
        encoded = name.encode()
        offset = len(local)
        local += struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 20, 0, 0, method, 0, 0x21, crc,
                             len(payload), declared_size, len(encoded), 0) + encoded + payload
        central += struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 20, 3, 20, 0, 0, method, 0, 0x21, crc,
                               len(payload), declared_size, len(encoded), 0, 0, 0, 0, 0o644 << 16, offset) + encoded
    count = len(entries) if declared_count is None else declared_count
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, len(central), len(local), 0)
    return bytes(local + central + end)


def stored(name, data):
    return name, zipfile.ZIP_STORED, data, zlib.crc32(data), len(data)


def deflated(name, data, declared_size=None):
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = compressor.compress(data) + compressor.flush()
    return name, zipfile.ZIP_DEFLATED, stream, zlib.crc32(data), len(data) if declared_size is None else declared_size


def zeros_deflated(mebibytes):
    """(raw deflate stream, crc32) of `mebibytes` MiB of zeros, about 1 KB per MiB: one compressed
    MiB repeated (a full flush makes each copy independent), then an empty final block."""
    zero_mib = bytes(MIB)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(zero_mib) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mebibytes):
        crc = zlib.crc32(zero_mib, crc)
    return block * mebibytes + b"\x03\x00", crc
