"""Checks that make an uploaded file a safe, loadable extension archive, and CRX -> ZIP."""
import json
import posixpath
import stat
import struct
import zipfile

CHUNK = 1024 * 1024


class InvalidArchive(ValueError):
    """The upload is not an extension archive Lantern will store; the message says why."""


def validate_zip(fileobj, *, max_uncompressed, max_entries):
    """Raise InvalidArchive unless `fileobj` is a readable ZIP of regular files and folders
    (no symlinks, no encrypted or duplicate entries) with a manifest.json at its root (or in
    its single top-level folder), no absolute or `..` paths, and at most `max_uncompressed`
    bytes once extracted, counted by really inflating every entry, so headers that lie
    about sizes do not get a zip bomb through."""
    check_entry_count(fileobj, max_entries)
    try:
        archive = zipfile.ZipFile(fileobj)
    except (zipfile.BadZipFile, OSError, ValueError):
        raise InvalidArchive("The file is not a readable ZIP archive.") from None
    with archive:
        entries = archive.infolist()
        names = set()
        for entry in entries:
            check_path(entry.filename)
            check_kind(entry)
            normalized = posixpath.normpath(entry.filename)
            if normalized in names:
                raise InvalidArchive(f"The archive holds {entry.filename!r} twice.")
            names.add(normalized)
        if sum(e.file_size for e in entries) > max_uncompressed:
            raise InvalidArchive(f"The archive expands to more than {max_uncompressed} bytes.")
        manifest = manifest_path([e.filename for e in entries])
        total = 0
        try:
            for entry in entries:
                with archive.open(entry) as member:
                    while chunk := member.read(CHUNK):
                        total += len(chunk)
                        if total > max_uncompressed:
                            raise InvalidArchive(f"The archive expands to more than {max_uncompressed} bytes.")
            json.loads(archive.read(manifest))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError,
                RuntimeError) as error:
            raise InvalidArchive(f"The archive is damaged or uses an unsupported compression: {error}.") from None
        except ValueError:
            raise InvalidArchive(f"{manifest} is not valid JSON.") from None


def check_entry_count(fileobj, max_entries):
    """Read the entry count from the end-of-central-directory record before zipfile
    loads the whole directory (millions of tiny entries would cost memory first)."""
    fileobj.seek(0, 2)
    size = fileobj.tell()
    fileobj.seek(max(0, size - 65536 - 22))
    tail = fileobj.read()
    fileobj.seek(0)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        raise InvalidArchive("The file is not a readable ZIP archive.")
    total = struct.unpack("<H", tail[at + 10:at + 12])[0]
    if total == 0xFFFF:
        raise InvalidArchive("ZIP64 archives with that many entries are not supported.")
    if total > max_entries:
        raise InvalidArchive(f"The archive has more than {max_entries} entries.")


def check_kind(entry):
    if entry.flag_bits & 0x1:
        raise InvalidArchive(f"The archive entry {entry.filename!r} is encrypted.")
    kind = stat.S_IFMT(entry.external_attr >> 16)  # 0 when the archiver recorded no file type
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        raise InvalidArchive(f"The archive entry {entry.filename!r} is not a regular file or folder "
                             "(symlinks and devices are refused).")


def check_path(name):
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":") or "\\" in name:
        raise InvalidArchive(f"The archive entry {name!r} has an absolute or Windows path.")
    if ".." in posixpath.normpath(name).split("/") or ".." in name.split("/"):
        raise InvalidArchive(f"The archive entry {name!r} points outside the archive ('..').")


def manifest_path(names):
    """manifest.json at the root, or inside the one folder that holds everything."""
    if "manifest.json" in names:
        return "manifest.json"
    tops = {name.split("/", 1)[0] for name in names}
    if len(tops) == 1 and f"{next(iter(tops))}/manifest.json" in names:
        return f"{next(iter(tops))}/manifest.json"
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
