"""A seccomp filter for the sandbox: closes what the namespaces leave open.

bubblewrap takes a compiled classic-BPF program (`--seccomp FD`) and installs it on the sandboxed
process before it runs anything, so every process in the sandbox carries it and none can remove it.
The filter is a deny list on top of the namespaces, answered with EPERM (the code sees an ordinary
error, not a crash):

- reading or writing other processes' memory: `ptrace`, `process_vm_readv`, `process_vm_writev`,
  `pidfd_getfd`, `kcmp`;
- new namespaces, mounts and roots: `unshare`, `setns`, `clone` with a CLONE_NEW* flag, `mount`,
  the new mount API, `pivot_root`, `chroot` (`clone3` answers ENOSYS, so the C library falls back
  to `clone`, whose flags a filter can read);
- signals to the supervisor and to bwrap's init (pid 2 and 1 inside the pid namespace), to every
  process at once (-1), or to their process groups: `kill`, `tkill`, `tgkill`, `rt_sigqueueinfo`,
  `rt_tgsigqueueinfo`, and `pidfd_send_signal` altogether. (Processes outside are out of reach
  already: they are not in the pid namespace.)
- signals the kernel sends for a file: `fcntl` F_SETOWN, F_SETOWN_EX and F_SETSIG, and the
  sockets' `ioctl` FIOSETOWN and SIOCSPGRP (a pipe owned by the supervisor, O_ASYNC and a write
  stopped it with SIGSTOP). Without an owner, SIGIO and SIGURG go nowhere; F_NOTIFY and leases
  name the caller as owner, which can no longer be changed; PR_SET_PDEATHSIG signals the caller
  only; a child's exit signal goes to its parent (with CLONE_PARENT the child takes the caller's
  own exit signal, SIGCHLD for the worker the supervisor forked). Landlock (ABI 6, in `_child`)
  refuses every signal out of the code's domain as well.
- other processes' scheduling and limits: `setpriority`, `ioprio_set`, `sched_setaffinity`,
  `sched_setscheduler`, `sched_setparam`, `sched_setattr` and `prlimit64` are allowed on the
  calling process only (a nice-19, one-core or zero-limit supervisor would stop watching);
- sockets of any family but AF_UNIX (`socket`, `socketpair`): AF_VSOCK and the like reach past
  the network namespace; EAFNOSUPPORT, as a kernel without the family answers;
- memory the supervisor cannot see: `memfd_create`, `memfd_secret`, SysV IPC altogether
  (`shmget`, `msgget`, `semget` and the calls on them: its /dev/shm is a size-capped tmpfs it
  counts, and a message queue is kernel memory no process maps), POSIX message queues
  (`mq_open`), `vmsplice` (user pages, huge ones whole, held by a pipe after they are unmapped);
- kernel buffers larger than the default: `setsockopt` SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE and
  SO_RCVBUFFORCE, and `fcntl` F_SETPIPE_SZ. Every socket and pipe keeps the kernel's default
  size, which the supervisor charges each one at (`_child`): without a cgroup, nothing else
  counts them (socket pairs with 8 MB buffers held 2.4-3.1 GB under a 512 MB limit);
- `personality` other than a query or PER_LINUX (no ASLR switched off), `modify_ldt`;
- the kernel's larger attack surface that no answer needs: `bpf`, `perf_event_open`,
  `userfaultfd`, `io_uring_*`, the keyring, modules, `kexec`, `reboot`, swap, `acct`,
  file handles (`open_by_handle_at`), `iopl`/`ioperm`.

Any other architecture than the one the filter was built for (an x86-64 process making i386 or
x32 calls) is killed. Filters exist for x86-64 and aarch64; on other machines the sandbox runs
with the namespaces alone. The x86-64 filter is tested here; the aarch64 one is not.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["seccomp_program"]

# classic BPF
_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000

_NR, _ARCH = 0, 4  # offsets in struct seccomp_data


def _arg(n: int) -> int:
    return 16 + 8 * n  # args[n]'s low word (little-endian)


_CLONE_NEW = 0x7E020080  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
_PROTECTED_PIDS = (0, 1, 2, 0xFFFFFFFF, 0xFFFFFFFE)  # own group, init, supervisor, all, group 2
_AF_UNIX = 1
# Who the kernel signals for a file (SIGIO, SIGURG): F_SETOWN, F_SETSIG, F_SETOWN_EX, and the
# sockets' ioctls FIOSETOWN and SIOCSPGRP
# and F_SETPIPE_SZ (a pipe stays at its 16 default pages, which the supervisor counts)
_SET_OWNER_FCNTL = (8, 10, 15, 1031)
_SET_OWNER_IOCTL = (0x8901, 0x8902)
_PERSONALITY_OK = (0, 0xFFFFFFFF)  # PER_LINUX, and the query
# setsockopt(SOL_SOCKET, SO_SNDBUF / SO_RCVBUF / SO_SNDBUFFORCE / SO_RCVBUFFORCE): a socket keeps
# the kernel's default buffer, the size the supervisor charges each socket at
_SOL_SOCKET = 1
_BUFFER_OPTIONS = (7, 8, 32, 33)

_TABLES = {
    # machine: (AUDIT_ARCH, {name: number}); numbers from the kernel's syscall tables
    "x86_64": (
        0xC000003E,
        {
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "pidfd_getfd": 438,
            "kcmp": 312,
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "chroot": 161,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "pidfd_send_signal": 424,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "reboot": 169,
            "swapon": 167,
            "swapoff": 168,
            "acct": 163,
            "open_by_handle_at": 304,
            "name_to_handle_at": 303,
            "iopl": 172,
            "ioperm": 173,
            "modify_ldt": 154,
            "memfd_create": 319,
            "memfd_secret": 447,
            "shmget": 29,
            "shmat": 30,
            "shmctl": 31,
            "shmdt": 67,
            "msgget": 68,
            "msgsnd": 69,
            "msgrcv": 70,
            "msgctl": 71,
            "semget": 64,
            "semop": 65,
            "semctl": 66,
            "semtimedop": 220,
            "mq_open": 240,
            "vmsplice": 278,
            "setsockopt": 54,
            "kill": 62,
            "tkill": 200,
            "tgkill": 234,
            "rt_sigqueueinfo": 129,
            "rt_tgsigqueueinfo": 297,
            "clone": 56,
            "clone3": 435,
            "socket": 41,
            "socketpair": 53,
            "personality": 135,
            "setpriority": 141,
            "ioprio_set": 251,
            "sched_setaffinity": 203,
            "sched_setscheduler": 144,
            "sched_setparam": 142,
            "sched_setattr": 314,
            "prlimit64": 302,
            "fcntl": 72,
            "ioctl": 16,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "pidfd_getfd": 438,
            "kcmp": 272,
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "chroot": 51,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "pidfd_send_signal": 424,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "reboot": 142,
            "swapon": 224,
            "swapoff": 225,
            "acct": 89,
            "open_by_handle_at": 265,
            "name_to_handle_at": 264,
            "memfd_create": 279,
            "memfd_secret": 447,
            "shmget": 194,
            "shmctl": 195,
            "shmat": 196,
            "shmdt": 197,
            "msgget": 186,
            "msgctl": 187,
            "msgrcv": 188,
            "msgsnd": 189,
            "semget": 190,
            "semctl": 191,
            "semtimedop": 192,
            "semop": 193,
            "mq_open": 180,
            "vmsplice": 75,
            "setsockopt": 208,
            "kill": 129,
            "tkill": 130,
            "tgkill": 131,
            "rt_sigqueueinfo": 138,
            "rt_tgsigqueueinfo": 240,
            "clone": 220,
            "clone3": 435,
            "socket": 198,
            "socketpair": 199,
            "personality": 92,
            "setpriority": 140,
            "ioprio_set": 30,
            "sched_setaffinity": 122,
            "sched_setscheduler": 119,
            "sched_setparam": 118,
            "sched_setattr": 274,
            "prlimit64": 261,
            "fcntl": 25,
            "ioctl": 29,
        },
    ),
}

# Calls allowed only when one argument is (or is not) in a set; everything else in a table is refused.
# name: (argument, values, allowed when the value is in `values`)
_SIGNALS = {
    "kill": (0, _PROTECTED_PIDS, False),
    "tkill": (0, (1, 2), False),
    "tgkill": (0, (1, 2), False),
    "rt_sigqueueinfo": (0, _PROTECTED_PIDS, False),
    "rt_tgsigqueueinfo": (0, (1, 2), False),
}
_SELF_ONLY = ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr", "prlimit64")
# (which, who): PRIO_PROCESS / IOPRIO_WHO_PROCESS, and 0 for the caller (PRIO_USER 0 would be the
# whole uid, the supervisor with it)
_SELF_ONLY_WHICH = {"setpriority": 0, "ioprio_set": 1}
_CONDITIONAL = {
    **_SIGNALS,
    **{name: (0, (0,), True) for name in _SELF_ONLY},
    "socket": (0, (_AF_UNIX,), True),
    "socketpair": (0, (_AF_UNIX,), True),
    "personality": (0, _PERSONALITY_OK, True),
    "fcntl": (1, _SET_OWNER_FCNTL, False),
    "ioctl": (1, _SET_OWNER_IOCTL, False),
}
_ANSWERS = {"socket": errno.EAFNOSUPPORT, "socketpair": errno.EAFNOSUPPORT}
_SPECIAL = {"clone", "clone3", "setsockopt", *_CONDITIONAL, *_SELF_ONLY_WHICH}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _conditional(number: int, arg: int, values: tuple[int, ...], allowed_if_in: bool, refuse: int) -> list[bytes]:
    """If the syscall is `number`: load `arg`, compare it with each value; allow or refuse.
    The body ends in two returns: [allow, refuse] or [refuse, allow]."""
    matched, unmatched = (_ALLOW, refuse) if allowed_if_in else (refuse, _ALLOW)
    body = [_op(_LD_W_ABS, _arg(arg))]
    for index, value in enumerate(values):
        remaining = len(values) - index - 1
        body.append(_op(_JEQ, value, remaining + 1, 0))  # to `matched`
    body += [_op(_RET, unmatched), _op(_RET, matched)]
    return [_op(_JEQ, number, 0, len(body))] + body


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The compiled filter for `machine` (default: this one), or None where there is none."""
    machine = (machine or platform.machine()).lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if machine not in _TABLES:
        return None
    arch, table = _TABLES[machine]
    eperm = _ERRNO | errno.EPERM
    prog = [_op(_LD_W_ABS, _ARCH), _op(_JEQ, arch, 1, 0), _op(_RET, _KILL_PROCESS), _op(_LD_W_ABS, _NR)]
    if machine == "x86_64":  # the x32 ABI: the same numbers with bit 30 set
        prog += [_op(_JGE, 0x40000000, 0, 1), _op(_RET, _KILL_PROCESS)]
    for name, number in sorted(table.items()):
        if name not in _SPECIAL:
            prog += [_op(_JEQ, number, 0, 1), _op(_RET, eperm)]
    prog += [_op(_JEQ, table["clone3"], 0, 1), _op(_RET, _ERRNO | errno.ENOSYS)]
    # clone: refuse namespace flags, allow the rest (threads, fork)
    prog += [
        _op(_JEQ, table["clone"], 0, 4),
        _op(_LD_W_ABS, _arg(0)),
        _op(_JSET, _CLONE_NEW, 0, 1),
        _op(_RET, eperm),
        _op(_RET, _ALLOW),
    ]
    for name, (arg, values, allowed_if_in) in _CONDITIONAL.items():
        if name in table:
            prog += _conditional(table[name], arg, values, allowed_if_in, _ERRNO | _ANSWERS.get(name, errno.EPERM))
    for name, which in _SELF_ONLY_WHICH.items():
        # which == `which` and who == 0, else EPERM
        prog += [
            _op(_JEQ, table[name], 0, 6),
            _op(_LD_W_ABS, _arg(0)),
            _op(_JEQ, which, 0, 3),
            _op(_LD_W_ABS, _arg(1)),
            _op(_JEQ, 0, 0, 1),
            _op(_RET, _ALLOW),
            _op(_RET, eperm),
        ]
    # setsockopt: at level SOL_SOCKET, a buffer size is refused; every other option is allowed
    refuse = len(_BUFFER_OPTIONS)
    prog += [
        _op(_JEQ, table["setsockopt"], 0, 5 + refuse),
        _op(_LD_W_ABS, _arg(1)),
        _op(_JEQ, _SOL_SOCKET, 0, 1 + refuse),
        _op(_LD_W_ABS, _arg(2)),
        *[_op(_JEQ, option, refuse - index, 0) for index, option in enumerate(_BUFFER_OPTIONS)],
        _op(_RET, _ALLOW),
        _op(_RET, eperm),
    ]
    prog.append(_op(_RET, _ALLOW))
    return b"".join(prog)
