"""Puts the agent, and so every process it runs, in a Landlock domain of its own.

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
CONFINED_ABI = 0  # the Landlock ABI confine() put the agent under (0: not confined); processes.py reads it


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


def confine() -> int:
    """Make this process not dumpable and restrict it (and its future children) to a new Landlock domain; its ABI,
    or 0 when the kernel has no Landlock (then only the dumpable flag is set). The ABI is kept in CONFINED_ABI."""
    global CONFINED_ABI
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
