"""Checks that make an uploaded file a safe, loadable extension archive, and CRX -> ZIP. What any archive Lantern
unpacks must pass (its entry count, names, kinds, declared sizes) is app/core/zips.py's."""
import struct
import zipfile
import zlib

from app.core import strictjson, zips

READ_CHUNK = 16 * 1024  # compressed bytes read at a time
INFLATE_CHUNK = 64 * 1024  # the most one inflate step may produce, so no entry is ever held whole
MAX_MANIFEST_BYTES = 1024 * 1024
# Chrome unpacks only these: an entry in any other method is one the browser would never load.
LOADABLE_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
METHOD_NAMES = {1: "shrink", 6: "implode", 9: "deflate64", 12: "bzip2", 14: "lzma", 93: "zstd", 95: "xz", 98: "PPMd"}
LOCAL_HEADER = struct.Struct("<4s2xHH4x3L2H")
FLAG_DATA_DESCRIPTOR, FLAG_UTF8 = 0x8, 0x800
ZIP64_SIZE = 0xFFFFFFFF  # a local header size field that defers to the ZIP64 extra field


class InvalidArchive(ValueError):
    """The upload is not an extension archive Lantern will store; the message says why."""


def validate_zip(fileobj, *, max_uncompressed, max_entries):
    """Raise InvalidArchive unless `fileobj` is a readable ZIP of at most `max_entries` regular
    files and folders (no symlinks, no encrypted or duplicate entries), stored or deflated only,
    with a manifest.json of at most 1 MiB at its root (or in its single top-level folder), no
    absolute or `..` paths, and at most `max_uncompressed` bytes once extracted.

    Sizes are not taken on trust: every entry is really inflated from its own bytes, a bounded
    chunk at a time, and must give exactly the size and CRC its headers declare, so what a browser
    unpacks is what was checked and a lying header cannot get a zip bomb through."""
    try:
        entries = zips.read_entries(fileobj, max_entries)
        zips.check_entries(entries)
        for entry in entries:
            check_method(entry)
        manifest = manifest_entry(entries)
        zips.check_declared_sizes(entries, max_uncompressed, archive_size=fileobj.seek(0, 2))
    except zips.InvalidZip as error:  # the shared checks' words, as this module's refusal
        raise InvalidArchive(str(error)) from None
    check_manifest_size(manifest)
    for entry in entries:
        unpacked = unpack_entry(fileobj, entry, keep=entry is manifest)
        if entry is manifest:
            manifest_json = unpacked
    fileobj.seek(0)
    try:
        strictjson.loads(manifest_json)
    except strictjson.InvalidJson as error:
        raise InvalidArchive(f"{manifest.filename} {error}.") from None


def check_method(entry):
    if entry.compress_type not in LOADABLE_METHODS:
        method = METHOD_NAMES.get(entry.compress_type, f"method {entry.compress_type}")
        raise InvalidArchive(f"The archive entry {entry.filename!r} is compressed with {method}; only stored and "
                             "deflate entries are accepted (the only ones browsers load).")


def check_manifest_size(manifest):
    if manifest.file_size > MAX_MANIFEST_BYTES:
        raise InvalidArchive(f"{manifest.filename} is larger than {MAX_MANIFEST_BYTES} bytes (1 MiB).")


def unpack_entry(fileobj, entry, *, keep):
    """Unpack one entry within its declared size, checking size and CRC; its bytes if `keep`
    (only for the manifest, at most 1 MiB), else nothing is held."""
    size, crc, kept = 0, 0, []
    try:
        for chunk in entry_chunks(fileobj, entry):
            size += len(chunk)
            if size > entry.file_size:
                raise InvalidArchive(f"The archive is damaged: the entry {entry.filename!r} inflates to more than "
                                     f"the {entry.file_size} bytes its headers declare.")
            crc = zlib.crc32(chunk, crc)
            if keep:
                kept.append(chunk)
    except zlib.error as error:
        raise InvalidArchive(f"The archive is damaged: the entry {entry.filename!r} does not inflate ({error}).") \
            from None
    if size != entry.file_size:
        raise InvalidArchive(f"The archive is damaged: the entry {entry.filename!r} inflates to {size} bytes, "
                             f"not the {entry.file_size} its headers declare.")
    if crc != entry.CRC:
        raise InvalidArchive(f"The archive is damaged: the entry {entry.filename!r} fails its CRC check.")
    return b"".join(kept)


def entry_chunks(fileobj, entry):
    """The entry's bytes as a browser unpacks them, inflated from the raw stream (zipfile would
    stop at the declared size), at most INFLATE_CHUNK bytes at a time."""
    fileobj.seek(data_offset(fileobj, entry))
    compressed = compressed_chunks(fileobj, entry)
    if entry.compress_type == zipfile.ZIP_STORED or not entry.compress_size:  # some writers deflate b"" to nothing
        yield from compressed
        return
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    for data in compressed:
        while data and not inflater.eof:
            yield inflater.decompress(data, INFLATE_CHUNK)
            data = inflater.unconsumed_tail
        if inflater.eof:
            return
    while not inflater.eof:  # output zlib still holds once all input is in
        pending = inflater.decompress(b"", INFLATE_CHUNK)
        if not pending:
            raise InvalidArchive(f"The archive is damaged: the entry {entry.filename!r} is truncated.")
        yield pending


def compressed_chunks(fileobj, entry):
    left = entry.compress_size
    while left:
        data = fileobj.read(min(READ_CHUNK, left))
        if not data:
            raise InvalidArchive(f"The archive is damaged: the entry {entry.filename!r} is truncated.")
        left -= len(data)
        yield data


def data_offset(fileobj, entry):
    """Where the entry's compressed bytes start, once its local header agrees with the central
    directory the way Chrome's unzip requires (readers that trust either must see the same entry)."""
    if not 0 <= entry.header_offset <= fileobj.seek(0, 2) - LOCAL_HEADER.size:
        raise InvalidArchive(f"The archive is damaged: the entry {entry.filename!r} has no local header.")
    fileobj.seek(entry.header_offset)
    header = fileobj.read(LOCAL_HEADER.size)
    if len(header) != LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise InvalidArchive(f"The archive is damaged: the entry {entry.filename!r} has no local header.")
    _, flags, method, crc, compressed, size, name_length, extra_length = LOCAL_HEADER.unpack(header)
    name = fileobj.read(name_length)
    central_name = entry.orig_filename.encode("utf-8" if entry.flag_bits & FLAG_UTF8 else "cp437")
    sizes_agree = flags & FLAG_DATA_DESCRIPTOR or (
        crc == entry.CRC and compressed in (entry.compress_size, ZIP64_SIZE) and size in (entry.file_size, ZIP64_SIZE))
    if method != entry.compress_type or name != central_name or not sizes_agree:
        raise InvalidArchive(f"The archive is damaged: the local header of {entry.filename!r} disagrees with "
                             "the central directory.")
    return entry.header_offset + LOCAL_HEADER.size + name_length + extra_length


def manifest_entry(entries):
    """manifest.json at the root, or inside the one folder that holds everything."""
    by_name = {entry.filename: entry for entry in entries}
    if "manifest.json" in by_name:
        return by_name["manifest.json"]
    tops = {name.split("/", 1)[0] for name in by_name}
    if len(tops) == 1 and f"{next(iter(tops))}/manifest.json" in by_name:
        return by_name[f"{next(iter(tops))}/manifest.json"]
    raise InvalidArchive("The archive has no manifest.json at its root (or in its single top-level folder).")


def crx_to_zip(data):
    """The ZIP payload of a CRX2 or CRX3 file (the headers carry keys and signatures only)."""
    if data[:4] != b"Cr24":
        if data[:4] == b"PK\x03\x04":
            return data
        raise InvalidArchive("The store answered with something that is not a CRX file.")
    version = struct.unpack("<I", data[4:8])[0]
    if version == 3:
        header_size = struct.unpack("<I", data[8:12])[0]
        return data[12 + header_size:]
    if version == 2:
        key_length, signature_length = struct.unpack("<II", data[8:16])
        return data[16 + key_length + signature_length:]
    raise InvalidArchive(f"Unsupported CRX version {version}.")
