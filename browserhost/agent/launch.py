"""The checks of an exec or spawn request: who it runs as, its cwd, environment, arguments, timeout and terminal
size, and the executable its command names. Every check runs before anything starts, and each bad field is a 400
naming it."""
import os
from dataclasses import dataclass

from .http import AgentError, check_path, is_session_identity, session_names

TIMEOUT_RANGE = (1, 86400)
SIZE_RANGE = (1, 4096)  # a terminal's cols and rows
DEFAULT_SIZE = (80, 24)
ARGUMENT_LIMIT = 128 * 1024  # bytes of one argument or variable, as Linux's MAX_ARG_STRLEN
DEFAULT_PATH = "/usr/bin:/bin"
SESSION_HOME = "/home/session"


def home() -> str:
    """The session's home: the agent's own HOME (the sandbox sets it to /home/session)."""
    return os.environ.get("HOME") or SESSION_HOME


@dataclass
class Launch:
    """A checked exec or spawn request."""
    argv: list[str]
    env: dict[str, str]
    cwd: str
    timeout: int | None
    size: tuple[int, int] | None = None  # (cols, rows) of its terminal, None without one


def read_launch(body: dict, spawn: bool) -> Launch:
    """The request's fields checked in the order the brief gives (AgentError 400 at the first bad one)."""
    check_user(body.get("as_root"), body.get("as_user"))
    cwd = read_cwd(body.get("cwd"))
    env = read_env(body.get("env"))
    timeout = read_int(body, "timeout_sec", TIMEOUT_RANGE, None)
    size = read_size(body) if spawn else None  # checked even when there is no terminal to use it
    if not (spawn and read_bool(body, "allocate_tty")):
        size = None
    if size is not None:
        env.setdefault("TERM", "xterm-256color")
    argv = [resolve(body.get("command"), env["PATH"], cwd), *read_args(body.get("args"))]
    return Launch(argv, env, cwd, timeout, size)


def check_user(as_root, as_user) -> None:
    if as_root is not None and not isinstance(as_root, bool):
        raise AgentError(400, "invalid_as_root", "as_root must be a boolean")
    if as_root:
        raise AgentError(400, "as_root_not_supported", "processes run as the session's user: there is no root in "
                         "a session's sandbox")
    if as_user is None:
        return
    if not is_session_identity(as_user):
        raise AgentError(400, "as_user_not_supported", "a session has one user: as_user may only name it "
                         f"({', '.join(sorted(session_names()))})")


def read_cwd(value) -> str:
    if value is None:
        return home()
    cwd = check_path(value, "cwd")
    if not os.path.isdir(cwd) or not os.access(cwd, os.X_OK):
        raise AgentError(400, "invalid_cwd", f"cwd {cwd} is not a directory the session can enter")
    return cwd


def read_env(value) -> dict[str, str]:
    env = {"PATH": DEFAULT_PATH, "HOME": home(), "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    if value is None:
        return env
    if not isinstance(value, dict):
        raise AgentError(400, "invalid_env", "env must be an object of strings")
    for name, text in value.items():
        if not name or "=" in name or not clean_string(name) or not clean_string(text):
            raise AgentError(400, "invalid_env", f"env {name[:64]!r}: names and values are UTF-8 strings without "
                             "NUL (names without '=')")
        env[name] = text
    return env


def read_args(value) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(clean_string(arg) for arg in value):
        raise AgentError(400, "invalid_args", "args must be a list of UTF-8 strings without NUL")
    return value


def clean_string(value) -> bool:
    """A string the kernel can take as an argument: no NUL, at most ARGUMENT_LIMIT bytes, and encodable as a path
    is (UTF-8, a byte that is not as U+DC80..U+DCFF): JSON may hold other lone surrogates, which stand for no byte."""
    if not isinstance(value, str) or "\0" in value:
        return False
    try:
        return len(value.encode("utf-8", "surrogateescape")) <= ARGUMENT_LIMIT
    except UnicodeEncodeError:
        return False


def read_bool(body: dict, name: str) -> bool:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise AgentError(400, f"invalid_{name}", f"{name} must be a boolean")
    return bool(value)


def read_int(body: dict, name: str, bounds: tuple[int, int], default):
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not bounds[0] <= value <= bounds[1]:
        raise AgentError(400, f"invalid_{name}", f"{name} must be a whole number from {bounds[0]} to {bounds[1]}")
    return value


def read_size(body: dict) -> tuple[int, int]:
    return read_int(body, "cols", SIZE_RANGE, DEFAULT_SIZE[0]), read_int(body, "rows", SIZE_RANGE, DEFAULT_SIZE[1])


def resolve(command, search_path: str, cwd: str) -> str:
    """The executable `command` names: a path (relative to cwd) or a name looked up in PATH, as execvp would."""
    if not clean_string(command) or not command:
        raise AgentError(400, "invalid_command", "command must be a non-empty UTF-8 string without NUL")
    if "/" in command:
        candidates = [os.path.join(cwd, command)]
    else:
        candidates = [os.path.join(folder or cwd, command) for folder in search_path.split(":")]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    raise AgentError(400, "command_not_startable", f"{command[:256]}: no executable file of that name "
                     f"(PATH {search_path[:256]})")
