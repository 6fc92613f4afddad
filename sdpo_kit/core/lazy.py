"""A package's public names, imported on first use (PEP 562): what keeps ``import sdpo_kit`` instant.

    __getattr__, __dir__ = lazy_exports(__name__, {"train": "sdpo_kit.training:train", ...})

Standard library only, so importing it imports neither torch nor TRL.
"""

from __future__ import annotations


def lazy_exports(package: str, exports: dict[str, str]):
    """``(__getattr__, __dir__)`` for a package whose public names load on first use (PEP 562), so importing it
    imports nothing: ``exports`` maps a name to ``"sdpo_kit.x.y:attr"`` (an attribute of a module) or
    ``"sdpo_kit.x.y"`` (a module); any other name that is a module of the package (``sk.rewards``) is imported
    on first use too. TRL, in particular, is imported only when a name that needs it is read (after Unsloth,
    which must patch it first, on a GPU)."""
    import importlib

    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        target = exports.get(name)
        if target is None:
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module, _, attr = target.partition(":")
        value = importlib.import_module(module)
        return getattr(value, attr) if attr else value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
