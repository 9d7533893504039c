"""Puts the agent, and so every process it runs, in a user namespace and a Landlock domain of its own.

The user namespace maps only the agent's own uid and gid (so files and `id -u` are the session's user as before)
and holds max_user_namespaces at MAX_USER_NAMESPACES: the kernel counts user namespaces per uid across the machine
(every sandbox runs as one uid) and checks each ancestor namespace's limit, so a tenant looping `unshare -U` can
make at most that many and cannot use up the machine's, which every new sandbox needs (Chromium's in the session,
outside the agent's namespace, is not bound by it). The agent then drops every capability it got there (its
bounding set too), so nothing it runs has any.

The domain handles only the right to make block devices, so every file stays reachable as before; what it brings
is Landlock's process rule: a process in the domain cannot ptrace, pidfd_getfd, process_vm_* or open
/proc/<pid>/mem of a process outside it (Chromium, the sandbox's holder and relays) and, from ABI 6 on, cannot
signal one either.

The agent also makes itself not dumpable: its processes run as its user, and without that they could read its
memory (/proc/<pid>/mem, maps) or ptrace it, being in its own domain. The flag is reset when a child execs, so what
the agent runs stays as it would be."""
import ctypes
import logging
import os

log = logging.getLogger("agent")

SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture (added after the table was unified)
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
LANDLOCK_ACCESS_FS_MAKE_BLOCK = 1 << 11
LANDLOCK_SCOPE_SIGNAL = 1 << 1
SIGNAL_SCOPE_ABI = 6
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
CLONE_NEWUSER = 0x10000000
LINUX_CAPABILITY_VERSION_3 = 0x20080522
# User namespaces a tenant may make (each sandboxing tool takes one or two, a nested one more); the agent's own
# namespace counts one more in the session's.
MAX_USER_NAMESPACES = 16
CONFINED_ABI = 0  # the Landlock ABI confine() put the agent under (0: not confined); processes.py reads it
NAMESPACES_BOUND = False  # whether confine() bounded the user namespaces of what the agent runs


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class RulesetAttr(ctypes.Structure):
    # The kernel accepts a larger struct than it knows when the unknown tail is zero, so one layout fits all ABIs.
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The running kernel's Landlock ABI version, 0 without Landlock."""
    abi = libc().syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                         ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    return max(abi, 0)


def write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def own_user_namespace() -> bool:
    """Move this process into a user namespace of its own mapping only its uid and gid, bound to
    MAX_USER_NAMESPACES more, then drop every capability it has there; False (and logged) when the kernel refuses
    the namespace or its limit (the agent then serves without that bound). Must run while the process is dumpable
    (its /proc/self files are its own) and has one thread (unshare refuses a user namespace otherwise)."""
    c = libc()
    uid, gid = os.getuid(), os.getgid()
    if c.unshare(CLONE_NEWUSER) != 0:
        log.warning("no user namespace of its own (%s): what processes run may make user namespaces up to the "
                    "machine's limit", os.strerror(ctypes.get_errno()))
        return False
    try:
        write("/proc/self/setgroups", "deny")  # a namespace's maps are written unprivileged only without setgroups
        write("/proc/self/uid_map", f"{uid} {uid} 1")
        write("/proc/self/gid_map", f"{gid} {gid} 1")
        write("/proc/sys/user/max_user_namespaces", str(MAX_USER_NAMESPACES))
        bounded = True
    except OSError as error:
        log.warning("the agent's user namespace could not be set up (%s): what processes run may make user "
                    "namespaces up to the machine's limit", error)
        bounded = False
    drop_capabilities(c)
    return bounded


def drop_capabilities(c) -> None:
    """Empty this process's capability sets (its bounding set first, so no exec gives any back)."""
    with open("/proc/sys/kernel/cap_last_cap") as file:
        last = int(file.read())
    for capability in range(last + 1):
        if c.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")
    header, data = CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (CapData * 2)()
    if c.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def confine() -> int:
    """Move this process into a user namespace of its own (own_user_namespace), make it not dumpable and restrict it
    (and its future children) to a new Landlock domain; its ABI, or 0 when the kernel has no Landlock (then only the
    namespace and the dumpable flag are set). The ABI is kept in CONFINED_ABI."""
    global CONFINED_ABI, NAMESPACES_BOUND
    NAMESPACES_BOUND = own_user_namespace()
    if NAMESPACES_BOUND:
        log.info("in a user namespace of its own: at most %d more under it", MAX_USER_NAMESPACES)
    c = libc()
    if c.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")
    abi = landlock_abi()
    if abi < 1:
        log.warning("no Landlock: processes are not confined")
        return 0
    if c.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # landlock_restrict_self requires it (we are unprivileged)
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    attr = RulesetAttr(LANDLOCK_ACCESS_FS_MAKE_BLOCK, 0, LANDLOCK_SCOPE_SIGNAL if abi >= SIGNAL_SCOPE_ABI else 0)
    ruleset = c.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                        ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        if c.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    CONFINED_ABI = abi
    log.info("confined by Landlock ABI %d", abi)
    return abi
