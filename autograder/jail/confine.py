"""The last trusted step before the student's kernel: limits, Landlock, seccomp, then ``execve``.

This file is self-contained (standard library and ctypes only) because it does not run as an
import: the grader passes its source text to ``python -I -S -c SOURCE CONFIG_JSON`` as the last
link of the kernel's command (after bwrap and setpriv, already as the sandbox uid). It

1. sets the resource limits (``RLIMIT_AS`` or ``DATA``, ``FSIZE``, ``NOFILE``, ``NPROC``, ``CORE``);
2. sets ``no_new_privs`` (required by Landlock and seccomp without privileges);
3. optionally restricts the filesystem with Landlock (read/exec, read/write allow-lists; TCP bind
   and connect denied from ABI 4; signals and abstract sockets scoped to the sandbox from ABI 6);
4. optionally loads a seccomp filter (namespace creation, ptrace, bpf, keyrings, io_uring ...
   denied; with ``block_inet``, ``socket(AF_INET/AF_INET6)`` and ``connect`` denied too: the
   kernel only binds its sockets, and io_uring could make a socket without the system call);
5. replaces itself with the kernel command, with exactly the given environment.

A layer that was asked for and cannot be applied is a hard failure (exit 111 with the reason on
stderr): the grader decided which layers to record beforehand, so it must not silently run less.
With ``"check": true`` it applies what it can, prints the applied layers as JSON and exits 0; the
grader uses that to probe the machine.
"""

import ctypes
import json
import os
import platform
import resource
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
AF_INET, AF_INET6 = 2, 10
CLONE_NS_FLAGS = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

# (AUDIT_ARCH, syscall numbers): the table a filter is built from, per machine.
ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "socket": 41,
            "clone": 56,
            "clone3": 435,
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "open_by_handle_at": 304,
            "fsopen": 430,
            "fsmount": 432,
            "move_mount": 429,
            "open_tree": 428,
            "connect": 42,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "shmget": 29,
            "shmat": 30,
            "shmctl": 31,
            "shmdt": 67,
            "semget": 64,
            "semop": 65,
            "semctl": 66,
            "semtimedop": 220,
            "msgget": 68,
            "msgsnd": 69,
            "msgrcv": 70,
            "msgctl": 71,
            "mq_open": 240,
            "mq_unlink": 241,
            "mq_timedsend": 242,
            "mq_timedreceive": 243,
            "mq_notify": 244,
            "mq_getsetattr": 245,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "socket": 198,
            "clone": 220,
            "clone3": 435,
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "open_by_handle_at": 265,
            "fsopen": 430,
            "fsmount": 432,
            "move_mount": 429,
            "open_tree": 428,
            "connect": 203,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "shmget": 194,
            "shmat": 196,
            "shmctl": 195,
            "shmdt": 197,
            "semget": 190,
            "semop": 193,
            "semctl": 191,
            "semtimedop": 192,
            "msgget": 186,
            "msgsnd": 189,
            "msgrcv": 188,
            "msgctl": 187,
            "mq_open": 180,
            "mq_unlink": 181,
            "mq_timedsend": 182,
            "mq_timedreceive": 183,
            "mq_notify": 184,
            "mq_getsetattr": 185,
        },
    ),
}
DENIED_SYSCALLS = (
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "open_by_handle_at",
    "fsopen",
    "fsmount",
    "move_mount",
    "open_tree",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",  # io_uring: IORING_OP_SOCKET, hole H7
    # SysV IPC and POSIX message queues: objects that outlive every process of the uid, and (in the
    # fallback, no IPC namespace) the host's; no lesson library uses them (SECURITY.md, "What a
    # notebook leaves behind")
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",
    "semget",
    "semop",
    "semctl",
    "semtimedop",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
)

RLIMITS = {
    "AS": resource.RLIMIT_AS,
    "DATA": resource.RLIMIT_DATA,
    "FSIZE": resource.RLIMIT_FSIZE,
    "NOFILE": resource.RLIMIT_NOFILE,
    "NPROC": resource.RLIMIT_NPROC,
    "CORE": resource.RLIMIT_CORE,
    "CPU": resource.RLIMIT_CPU,
}

# Landlock (include/uapi/linux/landlock.h)
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_WRITE_DIR = sum(1 << b for b in range(4, 13))  # remove/make dir, file, sock, fifo, symlink ...
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_ONLY = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2


class ConfineError(Exception):
    pass


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def set_rlimits(limits):
    for name, value in limits.items():
        value = int(value)
        resource.setrlimit(RLIMITS[name], (value, value))


def set_no_new_privs(libc):
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise ConfineError(f"prctl(NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")


# ---------------------------------------------------------------- seccomp
def _insn(code, jt, jf, k):
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06


def seccomp_program(machine, block_inet):
    """A classic-BPF seccomp filter as bytes (one 8-byte instruction each)."""
    if machine not in ARCHES:
        raise ConfineError(f"no seccomp syscall table for machine {machine!r}")
    audit_arch, nr = ARCHES[machine]
    deny = SECCOMP_RET_ERRNO | EPERM
    prog = [
        _insn(LD_W_ABS, 0, 0, 4),  # A = arch
        _insn(JEQ_K, 1, 0, audit_arch),
        _insn(RET_K, 0, 0, deny),  # foreign ABI (i386 on x86_64): deny all
        _insn(LD_W_ABS, 0, 0, 0),
    ]  # A = syscall nr
    if machine == "x86_64":
        prog += [_insn(JGE_K, 0, 1, 0x40000000), _insn(RET_K, 0, 0, deny)]  # x32 ABI
    for name in DENIED_SYSCALLS:
        prog += [_insn(JEQ_K, 0, 1, nr[name]), _insn(RET_K, 0, 0, deny)]
    prog += [_insn(JEQ_K, 0, 1, nr["clone3"]), _insn(RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS)]
    # clone: deny any namespace flag (args[0], low 32 bits at offset 16)
    prog += [
        _insn(JEQ_K, 0, 4, nr["clone"]),
        _insn(LD_W_ABS, 0, 0, 16),
        _insn(JSET_K, 0, 1, CLONE_NS_FLAGS),
        _insn(RET_K, 0, 0, deny),
        _insn(RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    if block_inet:  # connect: the host's Unix sockets by path, which Landlock does not cover (hole H8)
        prog += [_insn(JEQ_K, 0, 1, nr["connect"]), _insn(RET_K, 0, 0, deny)]
        prog += [
            _insn(JEQ_K, 0, 5, nr["socket"]),
            _insn(LD_W_ABS, 0, 0, 16),
            _insn(JEQ_K, 2, 0, AF_INET),
            _insn(JEQ_K, 1, 0, AF_INET6),
            _insn(RET_K, 0, 0, SECCOMP_RET_ALLOW),
            _insn(RET_K, 0, 0, SECCOMP_RET_ERRNO | EAFNOSUPPORT),
        ]
    prog.append(_insn(RET_K, 0, 0, SECCOMP_RET_ALLOW))
    return b"".join(prog)


def apply_seccomp(libc, block_inet):
    code = seccomp_program(platform.machine(), block_inet)
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise ConfineError(f"seccomp filter refused: {os.strerror(ctypes.get_errno())}")


# ---------------------------------------------------------------- Landlock
def landlock_abi(libc):
    abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return int(abi) if abi > 0 else 0


def apply_landlock(libc, rx, ro, rw):
    """Allow read+exec under ``rx``, read under ``ro``, everything under ``rw``; deny the rest."""
    abi = landlock_abi(libc)
    if abi < 1:
        raise ConfineError(f"Landlock unavailable (errno {os.strerror(ctypes.get_errno())})")
    fs = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_READ_DIR | FS_WRITE_DIR
    if abi >= 2:
        fs |= FS_REFER
    if abi >= 3:
        fs |= FS_TRUNCATE
    if abi >= 5:
        fs |= FS_IOCTL_DEV
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", fs, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, attr, len(attr), 0)
    if ruleset < 0:
        raise ConfineError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        read = FS_READ_FILE | FS_READ_DIR
        for paths, access in ((rx, read | FS_EXECUTE), (ro, read), (rw, fs)):
            for path in paths:
                _landlock_allow(libc, ruleset, path, access)
        if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            raise ConfineError(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return abi


# A rule binds an inode; a /proc/<pid> folder's inode lives only as long as its dentry, which the kernel
# may drop from its cache and make anew on the next lookup (another inode, then denied: measured
# after ``drop_caches``). The rule's O_PATH descriptor of a /proc folder is kept open, and inherited
# across ``execve``, so the dentry and the rule's inode stay the ones the process reads.
def _landlock_allow(libc, ruleset, path, access):
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path missing on this machine needs no rule
    pin = False
    try:
        folder = os.path.isdir(f"/proc/self/fd/{fd}")
        if not folder:
            access &= FILE_ONLY
        rule = struct.pack("=Qi", access, fd)
        if libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0) != 0:
            raise ConfineError(f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}")
        pin = folder and path.startswith("/proc/")
    finally:
        if pin:
            os.set_inheritable(fd, True)
        else:
            os.close(fd)


def _layers(cfg, libc):
    """``(name, apply)`` for each layer the config asks for, in the order they must be applied."""
    layers = [
        ("rlimits", lambda: set_rlimits(cfg.get("rlimits", {}))),
        ("no_new_privs", lambda: set_no_new_privs(libc)),
    ]
    if cfg.get("landlock"):
        ll = cfg["landlock"]
        layers.append(("landlock", lambda: apply_landlock(libc, ll.get("rx", []), ll.get("ro", []), ll.get("rw", []))))
    if cfg.get("seccomp"):
        layers.append(("seccomp", lambda: apply_seccomp(libc, bool(cfg["seccomp"].get("block_inet")))))
    return layers


def main(config_json):
    cfg = json.loads(config_json)
    check = bool(cfg.get("check"))
    applied, errors = [], []
    libc = _libc()
    for name, apply in _layers(cfg, libc):
        try:
            result = apply()
            applied.append(f"landlock:abi{result}" if name == "landlock" else name)
        except Exception as e:  # noqa: BLE001 - every failure is reported, none is swallowed
            errors.append(f"{name}: {type(e).__name__}: {e}")
            sys.stderr.write(f"autograder confine: {errors[-1]}\n")
            if not check:
                sys.exit(111)
    if check:  # probing the machine: report what applies, run nothing
        print(json.dumps({"applied": applied, "error": "; ".join(errors) or None}))
        sys.exit(0)
    argv = cfg["argv"]
    if cfg.get("cwd"):
        os.chdir(cfg["cwd"])
    os.execve(argv[0], argv, cfg.get("env", {}))


if __name__ == "__main__":
    main(sys.argv[1])
