"""The child side of the code sandbox: a script, run as ``python -I -S child.py CONFIG``.

It runs in a fresh interpreter (no ``site``: the standard library alone on ``sys.path``) started
by ``process.run_program`` in a fresh temporary directory holding ``Solution.py`` and a copy of
this script. ``CONFIG`` names the standard library's directories (``stdlib``) and those the program
must not read (``private``: site-packages, sdpo_kit's package with its problem file). Before the
model's code runs it locks itself down, as far as the platform allows, and reports what it
managed on a pipe of its own (one JSON object per line):

    limits      RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_CORE=0, RLIMIT_NOFILE, RLIMIT_NPROC=1
    network     a new network namespace (only a down loopback), else sockets replaced by raisers
    user        as root: setuid to nobody (65534), so RLIMIT_NPROC binds (root ignores it)
    filesystem  Landlock (Linux >= 5.13): write only beneath the temp dir, read only the standard
                library and system libraries, minus every private directory (Landlock only grants,
                so a directory holding one is allowed entry by entry around it); also no TCP
                (ABI >= 4), no signals to outside (ABI >= 6)
    disk        as root: a mount namespace with a size-capped tmpfs over the temp dir; /tmp,
                /var/tmp, /dev/shm, /run/lock covered read-only (only the temp dir shows through)
    imports     as root with an interpreter other users cannot enter (pyenv under /root): the same
                mount namespace shows nobody only the standard library there (else: preloaded
                modules only); and it covers each private directory with an empty read-only tmpfs
    packages    in the report: what keeps the private directories unread ("landlock", "mounts",
                both, or "readable")
    signals     neither nobody nor Landlock ABI >= 6: os.kill / os.killpg patched to refuse other pids

Then it executes ``Solution.py``: as ``__main__`` reading the real stdin (stdin tests), or as a
module whose function ``fn_name`` is called with JSON arguments read from stdin (call tests; the
names of ``typing`` predefined, as LiveCodeBench does for starter code's ``List[int]``; the
return value goes back on the report pipe as JSON; the parent compares it with the expected value,
which never comes here). An exception is reported as type, message and the last three
frames inside ``Solution.py`` (line number, function, source line).

It imports nothing from sdpo_kit (the package imports torch; this must start fast) and leaves
out on purpose: seccomp, a pid namespace, cgroups. It is a reliability guard for
rewards, not a security boundary against code written to escape (it shares the interpreter).
"""

import ctypes
import json
import os
import resource
import sys
import traceback

NOBODY = 65534
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
PR_SET_NO_NEW_PRIVS = 38
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 8192, 16384, 1 << 18)
# landlock syscalls have the same numbers on every architecture (added after the table unification)
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_ALL_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
FS_TRUNCATE = 1 << 14
READ_ONLY = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
# with the standard library, what an interpreter needs at run time; /proc stays out (another
# process's environ lives there); site-packages beneath /usr is cut out (see readable_paths)
SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/etc/ld.so.cache", "/etc/localtime", "/dev/urandom")
FILENAME = "Solution.py"
WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # same on every architecture, as landlock's
AT_FDCWD, AT_RECURSIVE, OPEN_TREE_CLONE, O_CLOEXEC, MOVE_MOUNT_F_EMPTY_PATH = -100, 0x8000, 1, 0o2000000, 4


def libc():
    lib = ctypes.CDLL(None, use_errno=True)
    lib.syscall.restype = ctypes.c_long
    return lib


def set_limits(cfg) -> list:
    """rlimits; each one that the platform refuses is left out of the returned list."""
    cpu = int(cfg["cpu_s"])
    wanted = [("RLIMIT_CPU", cpu, cpu + 1), ("RLIMIT_FSIZE", cfg["fsize"], cfg["fsize"]),
              ("RLIMIT_CORE", 0, 0), ("RLIMIT_NOFILE", 64, 64), ("RLIMIT_NPROC", 1, 1)]
    if sys.platform != "darwin":  # macOS refuses or ignores RLIMIT_AS
        wanted.append(("RLIMIT_AS", cfg["memory"], cfg["memory"]))
    applied = []
    for name, soft, hard in wanted:
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
            applied.append(name)
        except (ValueError, OSError, AttributeError):
            pass
    return applied


def disable_sockets() -> None:
    """Best effort (a program can reach the C library through ctypes): socket creation raises."""
    import _socket
    import socket

    def refuse(*args, **kwargs):
        raise PermissionError("network access is disabled in the sandbox")

    for mod in (socket, _socket):
        for name in ("socket", "socketpair", "create_connection", "create_server", "getaddrinfo", "fromfd"):
            if hasattr(mod, name):
                setattr(mod, name, refuse)


def new_netns(lib, root: bool) -> bool:
    """A network namespace of our own: only a loopback, down. A normal user needs a user namespace
    for it (refused in many containers and under Ubuntu's AppArmor userns restriction)."""
    return lib.unshare(CLONE_NEWNET if root else CLONE_NEWUSER | CLONE_NEWNET) == 0


def beneath(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def readable_paths(roots, private) -> list:
    """``roots`` with every ``private`` directory cut out. Landlock rules only grant, so a root that
    holds a private directory (the standard library holds site-packages; /usr holds dist-packages)
    is replaced by its entries, recursively; an entry that links outside the directory being
    opened up is left out (its target is readable if it lies in a root)."""
    out, seen = [], set()
    stack = [(os.path.realpath(r), None) for r in roots]
    while stack:
        path, parent = stack.pop()
        if path in seen or not os.path.exists(path) or any(beneath(path, d) for d in private):
            continue
        if parent is not None and not beneath(path, parent):
            continue
        seen.add(path)
        if not any(beneath(d, path) for d in private):
            out.append(path)
            continue
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue  # neither it nor its entries: the private directory stays out
        stack.extend((os.path.realpath(e.path) if e.is_symlink() else e.path, path) for e in entries)
    return sorted(out)


def landlock(lib, workdir, stdlib, private) -> int:
    """Confine the file system (and TCP, signals where the ABI has them); the ABI used, 0 if none."""
    if not sys.platform.startswith("linux"):
        return 0
    n = ctypes.c_long  # syscall(2) reads every argument as a long
    abi = lib.syscall(n(SYS_CREATE_RULESET), None, n(0), n(1))  # 1: LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return 0
    fs_all = FS_ALL_BY_ABI[max(k for k in FS_ALL_BY_ABI if k <= abi)]
    attr = (ctypes.c_uint64 * 3)(fs_all, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)  # net: bind+connect tcp
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8                                 # scoped: unix, signal
    ruleset = lib.syscall(n(SYS_CREATE_RULESET), ctypes.byref(attr), n(size), n(0))
    if ruleset < 0:
        return 0

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    def allow(path, access):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        if not os.path.isdir(path):  # a file rule takes file rights only
            access &= FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | (FS_TRUNCATE if abi >= 3 else 0)
        rule = PathBeneath(access, fd)
        lib.syscall(n(SYS_ADD_RULE), n(ruleset), n(1), ctypes.byref(rule), n(0))  # 1: RULE_PATH_BENEATH
        os.close(fd)

    for path in readable_paths((*SYSTEM_READ, *stdlib), private):
        allow(path, READ_ONLY)
    allow("/dev/null", FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE)
    allow(workdir, fs_all)
    ok = lib.syscall(n(SYS_RESTRICT_SELF), n(ruleset), n(0)) == 0
    os.close(ruleset)
    return abi if ok else 0


def blocking_ancestor(path):
    """The topmost directory above ``path`` that other users cannot enter (pyenv under /root), or None."""
    parts = os.path.realpath(path).split(os.sep)
    for i in range(2, len(parts)):
        d = os.sep.join(parts[:i])
        if not os.stat(d).st_mode & 0o001:
            return d
    return None


def readable_by_others(path) -> bool:
    """Every directory on the way to ``path`` can be entered by any user, and it can be read."""
    return blocking_ancestor(path) is None and os.stat(os.path.realpath(path)).st_mode & 0o005 == 0o005


def private_mounts(lib) -> bool:
    """As root: a mount namespace of our own, its propagation private first, so no mount made here
    ever reaches the host's namespace."""
    return lib.unshare(CLONE_NEWNS) == 0 and lib.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0


def mount(lib, source, target, fstype, flags, options=None) -> None:
    if lib.mount(source, target.encode(), fstype, flags, options) != 0:
        raise OSError(ctypes.get_errno(), f"sandbox: mount on {target} failed")


def workdir_tmpfs(lib, size: int) -> None:
    """A size-capped tmpfs, owned by nobody, over the temp dir: the program cannot fill the disk,
    and what it writes vanishes with its namespace."""
    cwd, source = os.getcwd(), open(FILENAME, "rb").read()
    mount(lib, b"tmpfs", cwd, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
          f"size={size},nr_inodes=4096,mode=700,uid={NOBODY},gid={NOBODY}".encode())
    os.chdir(cwd)  # into the new mount
    with open(FILENAME, "wb") as f:
        f.write(source)


def cover(lib, top: str, keep: list) -> bool:
    """Cover ``top`` with an empty read-only tmpfs through which only the directories ``keep``
    (beneath it) show, as detached bind mounts (open_tree / move_mount, Linux >= 5.2)."""
    n, trees = ctypes.c_long, []
    for d in keep:
        fd = lib.syscall(n(SYS_OPEN_TREE), n(AT_FDCWD), d.encode(), n(OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC))
        if fd < 0:
            for fd, _ in trees:
                os.close(fd)
            return False
        trees.append((fd, d))
    mount(lib, b"tmpfs", top, b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=755,size=64k")
    for fd, d in trees:
        os.makedirs(d, exist_ok=True)
        if lib.syscall(n(SYS_MOVE_MOUNT), n(fd), b"", n(AT_FDCWD), d.encode(), n(MOVE_MOUNT_F_EMPTY_PATH)) != 0:
            raise OSError(ctypes.get_errno(), f"sandbox: cannot show {d} again under {top}")
        os.close(fd)
    mount(lib, None, top, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return True


def cover_all(lib, dirs: list, workdir: str) -> dict:
    """In our mount namespace: cover each directory nobody may not enter on the way to the
    standard library ``dirs`` (/root for pyenv), showing only those there, and each world-writable
    one (/tmp, /var/tmp, /dev/shm, /run/lock), showing only our temp dir. Without Landlock that
    is what keeps nobody from writing outside the temp dir."""
    groups = {}
    for d in dirs:
        top = blocking_ancestor(d)
        if top is not None:
            groups.setdefault(top, set()).add(os.path.realpath(d))
    for w in {os.path.realpath(w) for w in WORLD_WRITABLE if os.path.isdir(w)}:
        if os.stat(w).st_mode & 0o002:
            groups.setdefault(w, set()).update(d for d in (workdir, *dirs) if d.startswith(w + os.sep))
    done = {}
    for top in sorted(groups, key=len):
        keep = sorted(groups[top], key=len)
        keep = [d for i, d in enumerate(keep) if not any(d.startswith(k + os.sep) for k in keep[:i])]
        done[top] = cover(lib, top, keep)
    os.chdir(workdir)  # into the temp dir's mount where it now is
    return done


def hide(lib, private: list) -> bool:
    """In our mount namespace: an empty read-only tmpfs over each private directory still in
    sight (site-packages inside a standard library shown by ``cover_all``, sdpo_kit's package).
    True: every one is covered (a mount that fails raises)."""
    for d in sorted(private, key=len):  # outer first: one inside a hidden one is then gone
        if os.path.isdir(d):
            mount(lib, b"tmpfs", d, b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"mode=555,size=4k")
    return True


def lock_down(cfg) -> dict:
    """Everything before the model's code runs; what was achieved, for the parent's record."""
    linux = sys.platform.startswith("linux")
    lib = libc() if linux else None
    was_root = os.geteuid() == 0
    stdlib, private = cfg["stdlib"], [d for d in cfg["private"] if not any(beneath(s, d) for s in cfg["stdlib"])]
    info = {"limits": set_limits(cfg), "user": "unchanged", "imports": "standard library", "disk": "per-file limit"}
    netns = linux and new_netns(lib, was_root)
    if not netns:
        disable_sockets()
    info["network"] = "netns" if netns else "sockets-disabled"
    drop, hidden = was_root and cfg["drop_root"], False
    if drop:
        mounts = linux and private_mounts(lib)
        if mounts:
            workdir_tmpfs(lib, cfg["disk"])
            info["disk"] = f"tmpfs {cfg['disk'] >> 20} MiB"
        dirs = [d for d in stdlib if os.path.isdir(d)]
        blocked = {blocking_ancestor(d) for d in dirs if not readable_by_others(d)}  # before any cover
        covered = cover_all(lib, dirs, os.getcwd()) if mounts else {}
        info["covered"] = sorted(k for k, ok in covered.items() if ok)
        if not all(covered.get(top) for top in blocked):
            preload()
            info["imports"] = "preloaded only"
        hidden = mounts and hide(lib, private)
    if linux:
        lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    info["landlock_abi"] = landlock(lib, os.getcwd(), stdlib, private) if linux else 0
    held = [name for name, ok in (("landlock", info["landlock_abi"] > 0), ("mounts", hidden)) if ok]
    info["packages"] = "+".join(held) or "readable"
    if drop:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)  # also clears every capability
        info["user"] = "nobody"
    if info["user"] != "nobody" and info["landlock_abi"] < 6:
        guard_signals()
        info["signals"] = "os.kill patched"
    return info


def guard_signals() -> None:
    """Same user as the parent and no Landlock signal scope: the kernel would let the program
    signal the trainer. Best effort (ctypes gets past it): os.kill / os.killpg refuse other pids."""
    own_kill, own_killpg = os.kill, os.killpg

    def kill(pid, sig):
        if pid not in (0, os.getpid()):
            raise PermissionError("signals to other processes are disabled in the sandbox")
        own_kill(pid, sig)

    def killpg(pgid, sig):
        if pgid not in (0, os.getpgrp()):
            raise PermissionError("signals to other processes are disabled in the sandbox")
        own_killpg(pgid, sig)

    os.kill, os.killpg = kill, killpg


def preload() -> None:
    """Modules a contest solution imports, loaded while the interpreter is still readable."""
    for name in ("array", "bisect", "collections", "copy", "dataclasses", "datetime", "decimal", "fractions",
                 "functools", "heapq", "io", "itertools", "math", "operator", "random", "re", "statistics",
                 "string", "typing"):
        try:
            __import__(name)
        except ImportError:
            pass


def error_record(e: BaseException) -> dict:
    frames = [[f.lineno, f.name, (f.line or "")[:300]] for f in traceback.extract_tb(e.__traceback__)
              if f.filename == FILENAME][-3:]
    if isinstance(e, SyntaxError) and e.filename == FILENAME:  # raised by compile: no frame of its own
        frames = [[e.lineno, "<module>", (e.text or "").strip()[:300]]]
    return {"kind": "error", "type": type(e).__name__, "message": str(e)[:1000], "frames": frames}


def jsonable(x):
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"Non-serializable result type: {type(x).__name__}")


def run(cfg, report) -> None:
    source = open(FILENAME, encoding="utf-8").read()
    call = cfg["fn_name"] is not None
    args = json.loads(sys.stdin.read() or "[]") if call else None
    namespace = {"__name__": "solution" if call else "__main__", "__file__": FILENAME, "__builtins__": __builtins__}
    if call:  # LeetCode starter code annotates with List[int] & co. and imports nothing (LiveCodeBench's
        exec("from typing import *", namespace)  # harness does the same, among other imports)
    try:
        exec(compile(source, FILENAME, "exec"), namespace)
        if call:
            fn = namespace.get(cfg["fn_name"])
            if isinstance(namespace.get("Solution"), type):
                fn = getattr(namespace["Solution"](), cfg["fn_name"], fn)
            if not callable(fn):
                raise NameError(f"no function named {cfg['fn_name']!r} in your code")
            value = fn(**args) if isinstance(args, dict) else fn(*args)
            report.write(json.dumps({"kind": "result", "value": jsonable(value)}) + "\n")
    except SystemExit as e:
        if call or e.code not in (None, 0):
            report.write(json.dumps(error_record(e)) + "\n")
    except BaseException as e:  # noqa: BLE001 (the model's exception is the result)
        report.write(json.dumps(error_record(e)) + "\n")
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass


def main() -> None:
    cfg = json.loads(sys.argv[1])
    os.set_inheritable(cfg["report_fd"], False)
    report = os.fdopen(cfg["report_fd"], "w", buffering=1, encoding="utf-8")
    info = lock_down(cfg)
    report.write(json.dumps({"kind": "ready", **info}) + "\n")
    sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    sys.argv = [FILENAME]
    run(cfg, report)
    report.flush()


if __name__ == "__main__":
    main()
