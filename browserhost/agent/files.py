"""The files calls that work on names and metadata: create and delete directories, delete and move files, set
permissions, describe a file (FileInfo) and list a folder. Bytes in and out are transfer.py's."""
import errno
import os
import re
import secrets
import shutil
import stat
from datetime import datetime, timezone

from .http import HIDDEN_FOLDER, AgentError, Request, check_path, empty, is_session_identity, json_answer, os_refusal

MODE_PATTERN = re.compile(r"[0-7]{1,4}")
GO_MODE_LETTERS = "dalTLDpSugct?"  # Go's fs.FileMode.String(): one letter per bit, from bit 31 down


def parse_mode(value, field: str, default: int | None = None) -> int:
    """An octal permission string ("755", "0644", "1777") as a number."""
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or not MODE_PATTERN.fullmatch(value):
        raise AgentError(400, "invalid_mode", f"{field} must be an octal mode such as \"644\" (at most 7777)")
    return int(value, 8)


def go_mode_bits(st_mode: int) -> int:
    """The mode as Go's os.Stat makes it: type and special bits moved to Go's FileMode bits."""
    bits = stat.S_IMODE(st_mode) & 0o777
    kind = stat.S_IFMT(st_mode)
    type_bits = {stat.S_IFDIR: ["d"], stat.S_IFLNK: ["L"], stat.S_IFBLK: ["D"], stat.S_IFCHR: ["D", "c"],
                 stat.S_IFIFO: ["p"], stat.S_IFSOCK: ["S"]}.get(kind, [])
    if st_mode & stat.S_ISUID:
        type_bits.append("u")
    if st_mode & stat.S_ISGID:
        type_bits.append("g")
    if st_mode & stat.S_ISVTX:
        type_bits.append("t")
    for letter in type_bits:
        bits |= 1 << (31 - GO_MODE_LETTERS.index(letter))
    return bits


def go_mode_string(st_mode: int) -> str:
    """Go's FileMode.String(): the set type letters in Go's order (or "-"), then rwxrwxrwx."""
    bits = go_mode_bits(st_mode)
    letters = "".join(letter for index, letter in enumerate(GO_MODE_LETTERS) if bits & (1 << (31 - index)))
    permissions = "".join(letter if bits & (1 << (8 - index)) else "-" for index, letter in enumerate("rwxrwxrwx"))
    return (letters or "-") + permissions


def rfc3339(mtime_ns: int) -> str:
    seconds, nanoseconds = divmod(mtime_ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=nanoseconds // 1000)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def file_info_of(path: str, status: os.stat_result) -> dict:
    is_dir = stat.S_ISDIR(status.st_mode)
    return {"name": os.path.basename(path) or "/", "path": path, "is_dir": is_dir,
            "size_bytes": 0 if is_dir else status.st_size, "mod_time": rfc3339(status.st_mtime_ns),
            "mode": go_mode_string(status.st_mode)}


def check_not_holding_hidden(path: str, field: str) -> None:
    """Deleting, moving or replacing a folder that holds the DevTools socket's folder would break the session:
    whether `path` names one as it is written, or where the links on its way lead."""
    for candidate in (path, entry_location(path)):
        if candidate == HIDDEN_FOLDER or HIDDEN_FOLDER.startswith(candidate.rstrip("/") + "/"):
            raise AgentError(400, "path_not_allowed", f"{field} holds {HIDDEN_FOLDER}, the session's own")


def entry_location(path: str) -> str:
    """Where the entry `path` names is: the links of its folders resolved, its own name not followed (a delete or
    a move works on a link itself, not on what it points to)."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def body_path(body: dict, field: str) -> str:
    return check_path(body.get(field), field)


def create_directory(request: Request):
    body = request.json()
    path = body_path(body, "path")
    mode = parse_mode(body.get("mode"), "mode", default=0o755)
    existed = os.path.isdir(path)
    try:
        os.makedirs(path, mode=mode, exist_ok=True)
        if not existed:
            os.chmod(path, mode)  # the leaf gets the mode asked for, whatever the umask
    except OSError as error:
        raise os_refusal(error, "path") from None
    return empty(201)


def delete_directory(request: Request):
    path = body_path(request.json(), "path")
    check_not_holding_hidden(path, "path")
    try:
        status = os.lstat(path)
        if stat.S_ISLNK(status.st_mode):
            os.unlink(path)  # a link to a folder: the link goes, not what it points to
        elif not stat.S_ISDIR(status.st_mode):
            raise AgentError(400, "not_a_directory", f"path: {path} is not a directory (delete_file deletes files)")
        else:
            shutil.rmtree(path)
    except OSError as error:
        raise os_refusal(error, "path") from None
    return empty(200)


def delete_file(request: Request):
    path = body_path(request.json(), "path")
    check_not_holding_hidden(path, "path")
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise AgentError(400, "is_a_directory", f"path: {path} is a directory (delete_directory deletes it)")
        os.unlink(path)
    except OSError as error:
        raise os_refusal(error, "path") from None
    return empty(200)


def move(request: Request):
    body = request.json()
    source = body_path(body, "src_path")
    destination = body_path(body, "dest_path")
    check_not_holding_hidden(source, "src_path")
    check_not_holding_hidden(destination, "dest_path")
    try:
        os.lstat(source)
    except OSError as error:
        raise os_refusal(error, "src_path") from None
    try:
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        try:
            os.rename(source, destination)
        except OSError as error:
            if error.errno != errno.EXDEV:
                raise
            move_across(source, destination)
    except OSError as error:
        raise os_refusal(error, "dest_path") from None
    return empty(200)


def move_across(source: str, destination: str) -> None:
    """A move between two of the session's tmpfs mounts (/tmp and the home): a copy under a temporary name in the
    destination's folder, renamed when whole, then the source deleted; a failed copy leaves nothing behind."""
    if os.path.isdir(destination) and not os.path.islink(destination):
        raise AgentError(400, "already_exists", f"dest_path: {destination} is a directory")
    temporary = part_name(os.path.dirname(destination))
    try:
        if os.path.isdir(source) and not os.path.islink(source):
            shutil.copytree(source, temporary, symlinks=True)
        else:
            shutil.copy2(source, temporary, follow_symlinks=False)
        os.rename(temporary, destination)
    except BaseException:
        remove_quietly(temporary)
        raise
    remove_quietly(source)


def part_name(folder: str) -> str:
    """A name of our own in `folder` for a file in the making, or a backup (leftovers(): *.part)."""
    return os.path.join(folder, f".lantern-{secrets.token_hex(8)}.part")


def remove_quietly(path: str) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError:
        pass


def check_session_identity(value, field: str, kind: str) -> None:
    """owner/group may only name the session's own user or group: a session has one user."""
    if value is not None and not is_session_identity(value, kind):
        raise AgentError(400, f"invalid_{field}", f"{field} must be the session's own (\"session\"): a session has "
                         "one user")


def set_file_permissions(request: Request):
    body = request.json()
    path = body_path(body, "path")
    mode = parse_mode(body.get("mode"), "mode")
    check_session_identity(body.get("owner"), "owner", "user")
    check_session_identity(body.get("group"), "group", "group")
    try:
        os.chmod(path, mode)  # owner and group are the session's already: nothing to change there
    except OSError as error:
        raise os_refusal(error, "path") from None
    return empty(200)


def file_info(request: Request):
    path = check_path(request.query.get("path"), "path")
    try:
        status = os.stat(path)  # as Go's os.Stat: a link is described by what it points to
    except OSError as error:
        raise os_refusal(error, "path") from None
    return json_answer(200, file_info_of(path, status))


def list_files(request: Request):
    path = check_path(request.query.get("path"), "path")
    try:
        with os.scandir(path) as entries:
            names = sorted(entry.name for entry in entries)
    except OSError as error:
        raise os_refusal(error, "path") from None
    infos = []
    for name in names:
        child = os.path.join(path, name)
        try:
            infos.append(file_info_of(child, os.lstat(child)))  # as Go's os.ReadDir: links are links
        except FileNotFoundError:
            continue  # gone since the listing
    return json_answer(200, infos)


ROUTES = [
    ("PUT", "/fs/create_directory", create_directory),
    ("PUT", "/fs/delete_directory", delete_directory),
    ("PUT", "/fs/delete_file", delete_file),
    ("PUT", "/fs/move", move),
    ("PUT", "/fs/set_file_permissions", set_file_permissions),
    ("GET", "/fs/file_info", file_info),
    ("GET", "/fs/list_files", list_files),
]
