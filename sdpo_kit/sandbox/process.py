"""Run one untrusted Python program in a fresh, locked-down child process: the parent side.

``run_program(code, stdin)`` starts ``python -I -S child.py`` (isolated mode: no PYTHON*
variables, no user site; no ``site``: the standard library alone on ``sys.path``) in a fresh
temporary directory holding ``Solution.py`` and a copy of the child script, with:

    environment   a fixed minimal one (PATH, HOME=TMPDIR=the temp dir, C.UTF-8, one BLAS thread);
                  nothing of the parent's, so no API keys
    session       its own (start_new_session): on a wall-clock timeout, too much output, or its
                  normal end, the whole process group gets SIGKILL
    output        stdout / stderr / the child's report read as they come, each capped
                  (``output_limit``): 100 MB printed is cut at the cap, the child killed
    temp dir      removed afterwards; owned by nobody when the child drops root (which then
                  mounts a 64 MiB tmpfs over it: the program cannot fill the disk)
    paths         the standard library's directories, which the child may read, and the private
                  ones, which it must not: every site-packages of this interpreter and of its
                  base, the user site, and sdpo_kit's package (its problem file holds every
                  expected output); ``python_paths()``

and the child (``child.py``) locks itself down before the model's code runs: rlimits
(CPU, address space, file size, no new processes, no core files), a network namespace or
disabled sockets, nobody instead of root, the private directories covered (as root), Landlock.
``ProgramRun.isolation`` says which of those the platform granted. Grading (what the output
means) lives in ``runner.py``.

Left out on purpose: containers, seccomp, cgroups, a pid namespace, Windows. This is a guard
against careless or runaway programs (the reward's inputs), not a boundary for code written to
escape; run untrusted training at scale in a container or VM as well.
"""

from __future__ import annotations

import json
import math
import os
import selectors
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CHILD = Path(__file__).with_name("child.py")   # copied into the temp dir and run by path
PACKAGE = Path(__file__).resolve().parents[1]  # sdpo_kit: the problem file lives in it (rewards/data)
NOBODY = 65534
STARTUP_S = 0.5         # interpreter start, on top of the program's own time limit
OUTPUT_LIMIT = 1 << 20  # bytes of stdout kept; more kills the program
STDERR_LIMIT = 1 << 16  # bytes of stderr kept; more is read and dropped
REPORT_LIMIT = 8 << 20  # bytes of the child's report (a call test's return value)
FILE_LIMIT = 16 << 20   # RLIMIT_FSIZE: the largest file the program may write
DISK_LIMIT = 64 << 20   # as root: the size of the tmpfs the program writes into
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "1",
       "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


@dataclass
class ProgramRun:
    """What one run of a program left behind (bytes as the program wrote them).

    ``records``: the first is the child's ``ready`` record, written before the program runs. The
    ones after it (the harness's ``result`` or ``error``) are claims, not verdicts: the program
    shares the child's interpreter and can write to the same pipe. That is why the child never
    receives a test's expected output and ``runner.grade`` compares every claimed value with
    it in the parent: a forged record can claim an output, never a pass. Lines that are not JSON
    objects with a string ``kind`` are dropped."""

    stdout: bytes = b""
    stderr: bytes = b""
    records: list = field(default_factory=list)   # the report pipe's JSON objects, in order (see below)
    returncode: int | None = None                  # negative: killed by that signal
    timed_out: bool = False                         # the wall-clock limit passed
    output_exceeded: bool = False                   # stdout (or the report) passed its cap
    wall_s: float = 0.0
    cpu_s: float = 0.0

    def record(self, kind: str) -> dict | None:
        return next((r for r in self.records if r.get("kind") == kind), None)

    @property
    def isolation(self) -> dict:
        """What the child achieved before the program ran ({} when it died before saying)."""
        ready = self.records[0] if self.records and self.records[0]["kind"] == "ready" else {}
        return {k: v for k, v in ready.items() if k != "kind"}


@lru_cache(maxsize=1)
def python_paths() -> dict:
    """``{"stdlib": [...], "private": [...]}``, real paths. stdlib: the standard library and its
    extension modules (``lib-dynload``), of the base interpreter when this one is a venv (a venv's
    own ``lib/pythonX.Y`` holds only site-packages). private: what a program must not read, even
    where it lies inside a standard library directory (pyenv and python.org builds keep
    site-packages there; Debian keeps dist-packages under /usr)."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix, "installed_base": sys.base_prefix,
            "installed_platbase": sys.base_exec_prefix}
    stdlib = {sysconfig.get_path(k, vars=base) for k in ("stdlib", "platstdlib")} | {os.path.dirname(os.__file__)}
    stdlib |= {os.path.join(d, "lib-dynload") for d in stdlib}
    stdlib |= {p for p in sys.path if p.endswith(".zip")}  # python311.zip, where a build has one
    private = {sysconfig.get_path(k, vars=v) for k in ("purelib", "platlib") for v in ({}, base)}
    private |= {*site.getsitepackages(), *site.getsitepackages([sys.base_prefix, sys.base_exec_prefix])}
    private |= {site.getusersitepackages(), str(PACKAGE)}
    stdlib = sorted({os.path.realpath(d) for d in stdlib if os.path.exists(d)})
    private = sorted({os.path.realpath(d) for d in private if d and os.path.isdir(d)})
    return {"stdlib": stdlib, "private": private}


def _remove_tree(path: str) -> None:
    def retry(func, p, exc):  # a program may chmod its own files to 000
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass
    shutil.rmtree(path, onerror=retry)


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):  # the group; the child alone if the group cannot be signalled
        try:
            kill(pid, signal.SIGKILL)
            return
        except ProcessLookupError:
            return
        except PermissionError:
            continue


def run_program(code: str, stdin: str | bytes = b"", *, fn_name: str | None = None, timeout_s: float = 2.0,
                memory_mb: int = 1024, output_limit: int = OUTPUT_LIMIT, drop_root: bool = True) -> ProgramRun:
    """Run ``code`` once in the sandbox. ``fn_name`` None: a stdin program fed ``stdin``; else the
    function ``fn_name`` is called with the JSON arguments in ``stdin`` (a list or a dict).

    The wall-clock limit is ``timeout_s + STARTUP_S``; RLIMIT_CPU is ``ceil(timeout_s) + 1``
    seconds (a backstop: the wall clock normally fires first)."""
    data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
    root_drop = drop_root and hasattr(os, "geteuid") and os.geteuid() == 0
    workdir = tempfile.mkdtemp(prefix="sdpo-sandbox-")
    try:
        Path(workdir, "Solution.py").write_text(code, encoding="utf-8")
        shutil.copyfile(CHILD, Path(workdir, CHILD.name))  # the child needs no path into the package
        if root_drop:  # the child becomes nobody: it must own its directory, and only that
            os.chown(workdir, NOBODY, NOBODY)
        cfg = {"cpu_s": math.ceil(timeout_s) + 1, "memory": int(memory_mb) << 20, "fsize": FILE_LIMIT,
               "disk": DISK_LIMIT, "fn_name": fn_name, "drop_root": bool(drop_root), "report_fd": None,
               **python_paths()}
        return _supervise(cfg, workdir, data, timeout_s + STARTUP_S, output_limit)
    finally:
        _remove_tree(workdir)


def _supervise(cfg: dict, workdir: str, data: bytes, wall_s: float, output_limit: int) -> ProgramRun:
    report_r, report_w = os.pipe()
    cfg["report_fd"] = report_w
    run = ProgramRun()
    start = time.monotonic()
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", CHILD.name, json.dumps(cfg)], cwd=workdir,
                                env={**ENV, "HOME": workdir, "TMPDIR": workdir}, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(report_w,),
                                start_new_session=True, close_fds=True)
    except BaseException:
        os.close(report_r)
        raise
    finally:
        os.close(report_w)
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray(), report_r: bytearray()}
    caps = {out_fd: output_limit, err_fd: STDERR_LIMIT, report_r: REPORT_LIMIT}
    sel = selectors.DefaultSelector()
    for fd in bufs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    stdin_fd, sent = proc.stdin.fileno(), 0
    if data:
        os.set_blocking(stdin_fd, False)
        sel.register(stdin_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    try:
        while any(k.events & selectors.EVENT_READ for k in sel.get_map().values()):
            left = start + wall_s - time.monotonic()
            if left <= 0:
                run.timed_out = True
                break
            for key, _ in sel.select(min(left, 1.0)):
                fd = key.fd
                if fd == stdin_fd:
                    try:
                        sent += os.write(fd, data[sent:sent + 65536])
                    except BlockingIOError:
                        continue
                    except OSError:  # the program exited or closed stdin before reading it all
                        sent = len(data)
                    if sent >= len(data):
                        sel.unregister(fd)
                        proc.stdin.close()
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    continue
                room = caps[fd] - len(bufs[fd])
                bufs[fd] += chunk[:max(room, 0)]
                if len(chunk) > room and fd != err_fd:  # stderr past its cap is dropped
                    run.output_exceeded = True
            if run.output_exceeded:
                break
    finally:
        _kill_group(proc.pid)  # also the normal path: nothing the program started outlives it
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        sel.close()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if not f.closed:
                f.close()
        _drain(report_r, bufs[report_r], REPORT_LIMIT)
        os.close(report_r)
    run.wall_s, run.cpu_s = time.monotonic() - start, usage.ru_utime + usage.ru_stime
    run.returncode = proc.returncode
    run.stdout, run.stderr = bytes(bufs[out_fd]), bytes(bufs[err_fd])
    for line in bytes(bufs[report_r]).decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("kind"), str):  # the program may write junk here
            run.records.append(record)
    return run


def _drain(fd: int, buf: bytearray, cap: int) -> None:
    """What a killed child left in its report pipe (everything in the group is dead by now)."""
    while len(buf) < cap:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            return
        if not chunk:
            return
        buf += chunk[:cap - len(buf)]


_ISOLATION: dict | None = None


def isolation_report() -> dict:
    """What the sandbox achieves on this machine (run once, cached): limits applied, user, network
    (netns or sockets-disabled), imports, landlock_abi, and the platform."""
    global _ISOLATION
    if _ISOLATION is None:
        run = run_program("print(1)", timeout_s=5)
        _ISOLATION = {"platform": sys.platform, "euid": os.geteuid() if hasattr(os, "geteuid") else None,
                      **run.isolation}
    return dict(_ISOLATION)
