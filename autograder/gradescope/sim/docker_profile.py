"""What Docker imposes on a container by default, as data: the capabilities root keeps and the
rules of the default seccomp profile (moby ``profiles/seccomp/default.json``), for a container
that holds exactly those capabilities.

Self-contained (standard library only): :mod:`autograder.gradescope.sim.container_init` loads it by
path under Debian's ``/usr/bin/python3``, whose ``seccomp`` module (package ``python3-seccomp``,
libseccomp's own bindings) compiles the rules.

The profile is an allow-list: everything not named fails with EPERM. Names below come from the
profile's unconditional list plus the entries its conditions grant to a container with the
default capabilities on x86_64/aarch64 (``ptrace`` and ``process_vm_*`` from kernel 4.8;
``chroot`` with CAP_SYS_CHROOT; ``arch_prctl``/``modify_ldt`` on x86). Without CAP_SYS_ADMIN the
profile allows ``clone`` only without namespace flags and answers ``clone3`` with ENOSYS (glibc
then falls back to ``clone``); ``mount``, ``umount2``, ``unshare``, ``setns``, ``pivot_root``,
``bpf``, ``perf_event_open``, ``keyctl`` and ``userfaultfd`` are not on the list. ``io_uring_*``
is left out as Docker 25 and later do.
"""

from __future__ import annotations

# Docker's 14 default capabilities (moby oci/caps/defaults.go) and their numbers (linux/capability.h).
DEFAULT_CAPS = {
    "CAP_CHOWN": 0,
    "CAP_DAC_OVERRIDE": 1,
    "CAP_FOWNER": 3,
    "CAP_FSETID": 4,
    "CAP_KILL": 5,
    "CAP_SETGID": 6,
    "CAP_SETUID": 7,
    "CAP_SETPCAP": 8,
    "CAP_NET_BIND_SERVICE": 10,
    "CAP_NET_RAW": 13,
    "CAP_SYS_CHROOT": 18,
    "CAP_MKNOD": 27,
    "CAP_AUDIT_WRITE": 29,
    "CAP_SETFCAP": 31,
}

EPERM, ENOSYS = 1, 38
CLONE_NAMESPACE_FLAGS = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
AF_VSOCK = 40
# personality(2) values the profile allows: PER_LINUX, UNAME26, ADDR_NO_RANDOMIZE (+|UNAME26), query.
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

ALLOWED = """
accept accept4 access adjtimex alarm bind brk capget capset chdir chmod chown chown32
clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime clock_gettime64
clock_nanosleep clock_nanosleep_time64 close close_range connect copy_file_range creat dup dup2 dup3
epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2 epoll_wait epoll_wait_old
eventfd eventfd2 execve execveat exit exit_group faccessat faccessat2 fadvise64 fadvise64_64 fallocate
fanotify_mark fchdir fchmod fchmodat fchown fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr
flistxattr flock fork fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate
ftruncate64 futex futex_time64 futex_waitv futimesat getcpu getcwd getdents getdents64 getegid
getegid32 geteuid geteuid32 getgid getgid32 getgroups getgroups32 getitimer getpeername getpgid
getpgrp getpid getppid getpriority getrandom getresgid getresgid32 getresuid getresuid32 getrlimit
get_robust_list getrusage getsid getsockname getsockopt get_thread_area gettid gettimeofday getuid
getuid32 getxattr inotify_add_watch inotify_init inotify_init1 inotify_rm_watch io_cancel ioctl
io_destroy io_getevents io_pgetevents io_pgetevents_time64 ioprio_get ioprio_set io_setup io_submit
ipc kill landlock_add_rule landlock_create_ruleset landlock_restrict_self lchown lchown32 lgetxattr
link linkat listen listxattr llistxattr _llseek lremovexattr lseek lsetxattr lstat lstat64 madvise
membarrier memfd_create memfd_secret mincore mkdir mkdirat mknod mknodat mlock mlock2 mlockall mmap
mmap2 mprotect mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64 mq_timedsend
mq_timedsend_time64 mq_unlink mremap msgctl msgget msgrcv msgsnd msync munlock munlockall munmap
name_to_handle_at nanosleep newfstatat _newselect open openat openat2 pause pidfd_open
pidfd_send_signal pipe pipe2 pkey_alloc pkey_free pkey_mprotect poll ppoll ppoll_time64 prctl pread64
preadv preadv2 prlimit64 process_mrelease pselect6 pselect6_time64 pwrite64 pwritev pwritev2 read
readahead readlink readlinkat readv recv recvfrom recvmmsg recvmmsg_time64 recvmsg remap_file_pages
removexattr rename renameat renameat2 restart_syscall rmdir rseq rt_sigaction rt_sigpending
rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend rt_sigtimedwait rt_sigtimedwait_time64
rt_tgsigqueueinfo sched_getaffinity sched_getattr sched_getparam sched_get_priority_max
sched_get_priority_min sched_getscheduler sched_rr_get_interval sched_rr_get_interval_time64
sched_setaffinity sched_setattr sched_setparam sched_setscheduler sched_yield seccomp select semctl
semget semop semtimedop semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto setfsgid
setfsgid32 setfsuid setfsuid32 setgid setgid32 setgroups setgroups32 setitimer setpgid setpriority
setregid setregid32 setresgid setresgid32 setresuid setresuid32 setreuid setreuid32 setrlimit
set_robust_list setsid setsockopt set_thread_area set_tid_address setuid setuid32 setxattr shmat
shmctl shmdt shmget shutdown sigaltstack signalfd signalfd4 sigprocmask sigreturn socketcall
socketpair splice stat stat64 statfs statfs64 statx symlink symlinkat sync sync_file_range syncfs
sysinfo tee tgkill time timer_create timer_delete timer_getoverrun timer_gettime timer_gettime64
timer_settime timer_settime64 timerfd_create timerfd_gettime timerfd_gettime64 timerfd_settime
timerfd_settime64 times tkill truncate truncate64 ugetrlimit umask uname unlink unlinkat utime
utimensat utimensat_time64 utimes vfork vmsplice wait4 waitid waitpid write writev
ptrace process_vm_readv process_vm_writev
chroot
arch_prctl modify_ldt
""".split()

# Sub-architectures Docker adds to the filter beside the native one (its "archMap").
SUB_ARCHES = {"x86_64": ("X86", "X32"), "aarch64": ("ARM",)}


def build_filter(seccomp, machine: str):
    """The default profile as a libseccomp ``SyscallFilter`` (not loaded). ``seccomp`` is the
    module of libseccomp's Python bindings. Names unknown to this libseccomp are skipped."""
    flt = seccomp.SyscallFilter(defaction=seccomp.ERRNO(EPERM))
    # Docker sets no_new_privs only when asked (--security-opt no-new-privileges): nor do we.
    flt.set_attr(seccomp.Attr.CTL_NNP, 0)
    for arch in SUB_ARCHES.get(machine, ()):
        try:
            flt.add_arch(getattr(seccomp.Arch, arch))
        except (AttributeError, RuntimeError, ValueError, OSError):
            pass
    skipped = []
    for name in ALLOWED:
        try:
            flt.add_rule(seccomp.ALLOW, name)
        except (RuntimeError, ValueError, OSError):
            skipped.append(name)
    flt.add_rule(seccomp.ALLOW, "socket", seccomp.Arg(0, seccomp.NE, AF_VSOCK))
    for value in PERSONALITIES:
        flt.add_rule(seccomp.ALLOW, "personality", seccomp.Arg(0, seccomp.EQ, value))
    flt.add_rule(seccomp.ALLOW, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NAMESPACE_FLAGS, 0))
    flt.add_rule(seccomp.ERRNO(ENOSYS), "clone3")
    return flt, skipped
