"""The package's rooms hold: one folder per algorithm, a shared core that imports no algorithm,
no import cycle (imports inside functions count), no module importing another's ``_private`` name,
at most 8 modules at the package root, no file over 400 lines, a config module that needs no
registry, and the public one-import paths (``sdpo_kit.losses``, ``sdpo_kit.rewards``) intact.

The import graph is read from the source with ``ast`` (every ``import`` / ``from ... import``
anywhere in a file, relative ones resolved), so a lazy import inside a function is an edge too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "sdpo_kit"
ALGORITHMS = ("grpo", "vapor", "sdpo", "ppo")


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def imports(name: str) -> list[tuple[str, str | None]]:
    """(imported module, imported name or None) for every sdpo_kit import in module ``name``."""
    path = MODULES[name]
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name.startswith("sdpo_kit")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_pkg else name.split(".")[:-1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            if base.startswith("sdpo_kit"):
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    out.append((sub, None) if sub in MODULES else (base, a.name))
    return out


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name in MODULES:
        for target, _ in imports(name):
            # a package importing its own submodules is how a package re-exports; not a cycle
            if target != name and target in MODULES and not target.startswith(name + "."):
                graph.setdefault(name, set()).add(target)
    return graph


def test_the_graph_reader_sees_lazy_and_relative_imports(tmp_path):
    """The checks below would be blind without this: a function-level import is found."""
    found = {t for t, _ in imports("sdpo_kit.cli")}
    assert "sdpo_kit.registry" in found        # imported inside train(), not at the top


def test_no_import_cycle():
    """No chain of imports, lazy ones included, comes back to where it started."""
    graph, state, stack, cycles = edges(), {}, [], []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                cycles.append(" -> ".join(stack[stack.index(v):] + [v]))
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_private_names_across_modules():
    """A module imports only public names of another (make it public where it lives, or move it)."""
    private = [f"{name} imports {target}.{what}" for name in MODULES for target, what in imports(name)
               if what and what.startswith("_") and not what.startswith("__") and target != name]
    assert not private, private


def test_the_core_imports_no_algorithm_and_no_registry():
    """core/ is shared machinery: it never reaches into an algorithm folder, the registry, the CLI,
    the loader, the rewards or the re-export package (each of those may import core, not back)."""
    above = ("sdpo_kit.registry", "sdpo_kit.cli", "sdpo_kit.models", "sdpo_kit.losses", "sdpo_kit.rewards",
             "sdpo_kit.deploy", "sdpo_kit.lab") + tuple(f"sdpo_kit.{a}" for a in ALGORITHMS)
    bad = [f"{name} -> {t}" for name in MODULES if name.startswith("sdpo_kit.core")
           for t, _ in imports(name) if t.startswith(above)]
    assert not bad, bad


def test_config_does_not_need_the_registry():
    """The registry needs the configs, not the other way round."""
    assert not [t for t, _ in imports("sdpo_kit.core.config") if t.startswith("sdpo_kit.registry")]
    assert any(t == "sdpo_kit.core.config" for t, _ in imports("sdpo_kit.registry"))


def test_one_folder_per_algorithm_with_its_loss():
    """Each algorithm has its room, and its math is in that room's loss.py."""
    for algo in ALGORITHMS:
        assert (PKG / algo / "__init__.py").exists(), algo
        assert (PKG / algo / "loss.py").exists(), algo


@pytest.mark.parametrize("room", ["core", "lab", "rewards", "deploy", *ALGORITHMS])
def test_each_room_lists_its_files(room):
    """A newcomer finds the room for a change from its docstring: every file in it is named there."""
    doc = ast.get_docstring(ast.parse((PKG / room / "__init__.py").read_text())) or ""
    missing = [p.name for p in (PKG / room).glob("*.py") if p.name != "__init__.py" and p.name not in doc]
    assert not missing, f"sdpo_kit/{room}/__init__.py does not name {missing}"


def test_at_most_eight_modules_at_the_root():
    root = [p.name for p in PKG.glob("*.py")]
    assert len(root) <= 8, root


def test_no_file_over_400_lines():
    long = {str(p.relative_to(PKG.parent)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_the_public_one_import_paths_work():
    from sdpo_kit.losses import gae, grpo_loss, sdpo_loss, vapor_loss
    from sdpo_kit.rewards import make_reward

    assert all(callable(f) for f in (gae, grpo_loss, sdpo_loss, vapor_loss, make_reward))
