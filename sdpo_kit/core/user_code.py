"""A learner's own function, named in a config: ``"my_rewards.py:larger"`` or ``"package.module:name"``.

    load_function("my_rewards.py:larger", base_dir="path/of/the/config", what="reward")

A spec whose part before the colon ends in ``.py`` is a file: relative to ``base_dir`` (the config's folder)
when it is there, else to the working directory; any other spec is an importable module. Every failure is
a ``UserCodeError`` that says what was asked for, where it was looked for and what went wrong: no colon, a
missing file, a file that fails to import (its error chained), a missing name, a name that is not callable.

Left out on purpose: running the function; the callers check what it returns, where they use it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path


class UserCodeError(ValueError):
    """A function named in a config could not be loaded (the message says which and why)."""


def resolve_file(name: str, base_dir: str | Path | None = None) -> tuple[Path, list[Path]]:
    """``name`` against ``base_dir`` first, then the working directory: (the path found or the first tried,
    every path tried)."""
    path = Path(name).expanduser()
    if path.is_absolute():
        return path, [path]
    tried = ([Path(base_dir) / path] if base_dir is not None else []) + [Path.cwd() / path]
    return next((p for p in tried if p.exists()), tried[0]), tried


def load_function(spec: str, base_dir: str | Path | None = None, what: str = "function"):
    """The callable ``spec`` names (module docstring); ``what`` names its use in the messages ("reward")."""
    if not isinstance(spec, str) or ":" not in spec:
        raise UserCodeError(f"{what} {spec!r}: write it as 'file.py:name' or 'package.module:name'")
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise UserCodeError(f"{what} {spec!r}: write it as 'file.py:name' or 'package.module:name'")
    if where.endswith(".py"):
        path, tried = resolve_file(where, base_dir)
        if not path.is_file():
            raise UserCodeError(f"{what} {spec!r}: no file {where!r} (looked in {', '.join(str(p) for p in tried)})")
        module_name = f"sdpo_kit_user_{path.stem}_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}"
        module = sys.modules.get(module_name)
        if module is None:
            loader_spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(loader_spec)
            try:
                loader_spec.loader.exec_module(module)
            except Exception as e:
                raise UserCodeError(f"{what} {spec!r}: {path} failed to import: {type(e).__name__}: {e}") from e
            sys.modules[module_name] = module
        source = str(path)
    else:
        try:
            module = importlib.import_module(where)
        except Exception as e:
            raise UserCodeError(f"{what} {spec!r}: cannot import module {where!r}: {type(e).__name__}: {e}") from e
        source = f"module {where}"
    if not hasattr(module, name):
        names = sorted(n for n in vars(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise UserCodeError(f"{what} {spec!r}: {source} has no {name!r} (its functions: {names})")
    fn = getattr(module, name)
    if not callable(fn):
        raise UserCodeError(f"{what} {spec!r}: {name!r} in {source} is a {type(fn).__name__}, not a function")
    return fn
