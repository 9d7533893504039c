"""Reading an uploaded ZIP archive's list of entries safely, and the checks every archive Lantern unpacks passes:
an extension (app/extensions/archive.py) or files sent into a session (app/browsers/uploads.py).

The central directory is counted header by header before zipfile reads it (the end record's count may lie, and
millions of tiny entries would cost seconds of CPU and hundreds of MiB first), and its size may be bounded too.
"""
import posixpath
import stat
import struct
import zipfile

END_RECORD = struct.Struct("<4s4H2LH")
ZIP64_LOCATOR = struct.Struct("<4sLQL")
ZIP64_END_RECORD = struct.Struct("<4sQ2H2L4Q")
CENTRAL_HEADER = struct.Struct("<4s24x3H12x")
FLAG_ENCRYPTED = 0x1
NOT_A_ZIP = "The file is not a readable ZIP archive."


class InvalidZip(ValueError):
    """The archive is not one Lantern unpacks; the message says why (in words for whoever sent it)."""


def read_entries(fileobj, max_entries, max_directory_bytes=None):
    """The archive's entries (zipfile.ZipInfo) once counted (opened)."""
    with opened(fileobj, max_entries, max_directory_bytes) as archive:
        return archive.infolist()


def opened(fileobj, max_entries, max_directory_bytes=None):
    """A zipfile.ZipFile of `fileobj` (the caller closes it), once its central directory was found as zipfile and
    Chrome's minizip find it, is at most `max_directory_bytes` long if given, and was counted to hold at most
    `max_entries` entries, as many as its end record says."""
    start, size, declared = central_directory(fileobj)
    if declared > max_entries:
        raise InvalidZip(f"The archive has more than {max_entries} entries.")
    if max_directory_bytes is not None and size > max_directory_bytes:
        raise InvalidZip(f"The archive's list of entries is {size} bytes, more than the {max_directory_bytes} "
                         "read of one (names, extra fields and comments).")
    counted = count_central_headers(fileobj, start, size, max_entries)
    if counted != declared:
        raise InvalidZip(f"The archive is damaged: its central directory holds {counted} entries "
                         f"but its end record says {declared}.")
    fileobj.seek(0)
    try:
        archive = zipfile.ZipFile(fileobj)
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError):
        raise InvalidZip(NOT_A_ZIP) from None
    if archive.start_dir != start or len(archive.infolist()) != counted:  # zipfile read the directory counted here
        archive.close()
        raise InvalidZip(NOT_A_ZIP)
    return archive


def central_directory(fileobj):
    """(offset, size, declared entry count) of the central directory, found as zipfile and
    Chrome's minizip find it: from the last end record, which with its comment must end the file
    (so both readers take the same one), and its ZIP64 record when a locator precedes it."""
    file_size = fileobj.seek(0, 2)
    tail_start = max(0, file_size - 0xFFFF - END_RECORD.size)
    fileobj.seek(tail_start)
    tail = fileobj.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + END_RECORD.size > len(tail):
        raise InvalidZip(NOT_A_ZIP)
    _, _, _, on_this_disk, declared, size, _, comment_length = END_RECORD.unpack_from(tail, at)
    if at + END_RECORD.size + comment_length != len(tail) or on_this_disk != declared:
        raise InvalidZip(NOT_A_ZIP)
    end = tail_start + at
    zip64 = zip64_end_record(fileobj, end)
    if zip64:
        declared, size = zip64
        end -= ZIP64_LOCATOR.size + ZIP64_END_RECORD.size
    if size > end:
        raise InvalidZip(NOT_A_ZIP)
    return end - size, size, declared


def zip64_end_record(fileobj, end):
    """(entry count, directory size) from the ZIP64 end record, or None without a locator."""
    if end < ZIP64_LOCATOR.size + ZIP64_END_RECORD.size:
        return None
    fileobj.seek(end - ZIP64_LOCATOR.size)
    if ZIP64_LOCATOR.unpack(fileobj.read(ZIP64_LOCATOR.size))[0] != b"PK\x06\x07":
        return None
    fileobj.seek(end - ZIP64_LOCATOR.size - ZIP64_END_RECORD.size)
    record = ZIP64_END_RECORD.unpack(fileobj.read(ZIP64_END_RECORD.size))
    if record[0] != b"PK\x06\x06":
        raise InvalidZip(NOT_A_ZIP)
    return record[7], record[8]


def count_central_headers(fileobj, start, size, max_entries):
    """Walk the fixed-size headers of the central directory, stopping once past `max_entries`."""
    fileobj.seek(start)
    counted = walked = 0
    while walked < size:
        header = fileobj.read(CENTRAL_HEADER.size)
        if len(header) != CENTRAL_HEADER.size or header[:4] != b"PK\x01\x02":
            raise InvalidZip("The archive is damaged: its central directory is truncated or malformed.")
        counted += 1
        if counted > max_entries:
            raise InvalidZip(f"The archive has more than {max_entries} entries.")
        variable = sum(CENTRAL_HEADER.unpack(header)[1:])  # name, extra field and comment lengths
        fileobj.seek(variable, 1)
        walked += CENTRAL_HEADER.size + variable
    return counted


def check_entries(entries):
    """Every entry's name stays inside the archive's folder, names a regular file or folder, is unencrypted, and
    is there once (after normalising: "a/./b" is "a/b", and folder "a/" is file "a")."""
    names = set()
    for entry in entries:
        check_path(entry)
        check_kind(entry)
        normalized = posixpath.normpath(entry.filename)
        if normalized in names:
            raise InvalidZip(f"The archive holds {entry.filename!r} twice.")
        names.add(normalized)


def check_path(entry):
    # zipfile cuts a name at its first NUL (a trick to show one name and write another): the name as stored says.
    if "\x00" in entry.orig_filename:
        raise InvalidZip(f"The archive entry {entry.orig_filename!r} has a NUL byte in its name.")
    name = entry.filename
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":") or "\\" in name:
        raise InvalidZip(f"The archive entry {name!r} has an absolute or Windows path.")
    if ".." in posixpath.normpath(name).split("/") or ".." in name.split("/"):
        raise InvalidZip(f"The archive entry {name!r} points outside the archive ('..').")


def check_kind(entry):
    if entry.flag_bits & FLAG_ENCRYPTED:
        raise InvalidZip(f"The archive entry {entry.filename!r} is encrypted.")
    kind = stat.S_IFMT(entry.external_attr >> 16)  # 0 when the archiver recorded no file type
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        raise InvalidZip(f"The archive entry {entry.filename!r} is not a regular file or folder "
                         "(symlinks and devices are refused).")


def is_folder(entry):
    """A folder: its name ends with "/", or a Unix archiver recorded it as one without that slash."""
    return entry.is_dir() or stat.S_IFMT(entry.external_attr >> 16) == stat.S_IFDIR


def check_declared_sizes(entries, max_uncompressed, archive_size):
    if sum(entry.file_size for entry in entries) > max_uncompressed:
        raise InvalidZip(f"The archive expands to more than {max_uncompressed} bytes.")
    check_compressed_size(entries, archive_size)


def check_compressed_size(entries, archive_size):
    # Entries sharing compressed bytes would make a pass over the entries read the file many times over.
    if sum(entry.compress_size for entry in entries) > archive_size:
        raise InvalidZip("The archive is damaged: its entries declare more compressed bytes than the file holds.")
