"""A pytest plugin for the notebook runs (``make notebooks``, ``make test-real``: ``-p kernels_over_ipc``): each
Jupyter kernel talks over IPC sockets in a folder of its own instead of TCP ports on 127.0.0.1.

Over TCP a kernel manager picks five free ports and the kernel binds them a moment later; with two pytest
workers starting kernels, one port was once taken in between ("Address already in use": notebook 08 never
started, ``make test`` on 2026-11-28). IPC sockets are files: each kernel's lie in a new temporary folder (the
default for IPC, ``kernel-ipc`` in the working directory, is one name both workers would share)."""

from __future__ import annotations

import os
import shutil
import tempfile

from jupyter_client.manager import KernelManager

FOLDER = tempfile.mkdtemp(prefix="sdpo-kit-kernels-")
_init = KernelManager.__init__


def _over_ipc(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.transport = "ipc"
    self.ip = os.path.join(tempfile.mkdtemp(dir=FOLDER), "ipc")   # sockets ipc-1 ... ipc-5 beside it


KernelManager.__init__ = _over_ipc


def pytest_unconfigure(config):
    shutil.rmtree(FOLDER, ignore_errors=True)
