"""The package's rooms hold: one folder per algorithm, every room on its floor, no import cycle (imports
inside functions count), no module importing another's ``_private`` name, at most 8 modules at the package
root, no file over 400 lines, a thin CLI, no module named like a test, a config module that needs no
registry, and the public one-import paths (``sdpo_kit.losses``, ``sdpo_kit.rewards``) intact.

The import graph is read from the source with ``ast`` (every ``import`` / ``from ... import``
anywhere in a file, relative ones resolved, and the registry's ``"sdpo_kit.x.y:name"`` entries, which
it imports on first use), so a lazy import inside a function is an edge too.

The floors, bottom to top (``FLOORS``): a module imports its own room or rooms on lower floors only,
and two rooms never import each other, directly or round a circle.

     1  core, presets  shared machinery; the course's YAML configs (data and a lookup); neither imports a room
     2  text, viz  answer rules, ``completion_text``, SDPO's teacher prompts: what the tasks, the lab's warm start
                   and the rewards all read and write, so it stands under them; the dashboard, live plots and
                   explorers, which draw what core's metrics name
     3  sandbox    running model-written code; imports no other room (the code task stands on it)
     4  tasks      what a run trains on (each registers its own; an algorithm's tasks register from its
                   package, so the tasks never import an algorithm)
     5  lab        the offline models: the tiny lab (its warm start trains on the tasks) and the real one
     6  rewards, models   beside each other: neither imports the other; both read the tasks and the lab
     7  grpo, ppo  ppo stands on models (its value head wraps the loaded policy) and rewards, grpo on rewards
     8  sdpo, vapor       both extend GRPO's loop and config
     9  losses     re-exports every algorithm's loss
    10  registry   names every trainer and registers vapor's task, so it stands above the algorithms
    11  deploy, training  the CLI's two halves below it: exports / ``sdpo-kit eval``, and ``train()``
    12  course, cli       what the notebooks and the command call
    13  sdpo_kit   the package's own ``__init__``: the public API, ``import sdpo_kit as sk``
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "sdpo_kit"
ALGORITHMS = ("grpo", "vapor", "sdpo", "ppo")
FLOORS = (                       # bottom to top; a room is a folder of sdpo_kit or a module at its root
    ("core", "presets"),
    ("text", "viz"),
    ("sandbox",),
    ("tasks",),
    ("lab",),
    ("rewards", "models"),
    ("grpo", "ppo"),
    ("sdpo", "vapor"),
    ("losses",),
    ("registry",),
    ("deploy", "training"),
    ("course", "cli"),
    ("sdpo_kit",),               # sdpo_kit/__init__.py
)
FLOOR = {room: i for i, rooms in enumerate(FLOORS, 1) for room in rooms}
REGISTRY_ENTRY = re.compile(r"^(sdpo_kit(?:\.\w+)+):\w+$")   # "sdpo_kit.grpo.loop:GRPOScratchTrainer"
CLI_MAX_LINES = 200


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def imports(name: str, source: str | None = None) -> list[tuple[str, str | None]]:
    """(imported module, imported name or None) for every sdpo_kit import in module ``name`` (its file, or
    ``source`` read as that module), registry entries (``"sdpo_kit.x.y:name"``) included."""
    path = MODULES[name]
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and REGISTRY_ENTRY.match(node.value):
            module, _, attr = node.value.partition(":")
            out.append((module, attr))
        elif isinstance(node, ast.Import):
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


def find_cycles(graph: dict[str, set[str]], starts) -> list[str]:
    """Every circle a depth-first walk from ``starts`` meets in ``graph``, as "a -> b -> a"."""
    cycles, state, stack = [], {}, []

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

    for u in starts:
        if u not in state:
            visit(u)
    return cycles


def test_no_import_cycle():
    """No chain of imports, lazy ones included, comes back to where it started."""
    cycles = find_cycles(edges(), sorted(MODULES))
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


def room(module: str) -> str:
    """The room of a dotted module name: ``sdpo_kit.grpo.loop`` -> ``grpo``, ``sdpo_kit.models`` -> ``models``,
    ``sdpo_kit`` -> ``sdpo_kit``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward_arrows(sources: dict[str, str] | None = None) -> list[str]:
    """Every import that goes up a floor or sideways into another room of the same floor, as
    ``file: import (room, floor N) -> room (floor M)``. ``sources``: module -> source read instead of its file."""
    bad = []
    for name in MODULES:
        here = room(name)
        for target, what in imports(name, (sources or {}).get(name)):
            there = room(target)
            if there == here or there not in FLOOR or here not in FLOOR:
                continue
            if FLOOR[there] >= FLOOR[here]:
                shown = f"from {target} import {what}" if what else f"import {target}"
                bad.append(f"{MODULES[name].relative_to(PKG.parent)}: {shown} ({here}, floor {FLOOR[here]}) -> "
                           f"{there} (floor {FLOOR[there]})")
    return bad


def room_cycles(sources: dict[str, str] | None = None) -> list[str]:
    """Circles on the room graph (room A imports room B ... imports room A), lazy imports included."""
    graph: dict[str, set[str]] = {}
    for name in MODULES:
        for target, _ in imports(name, (sources or {}).get(name)):
            if target.startswith("sdpo_kit") and room(target) != room(name):
                graph.setdefault(room(name), set()).add(room(target))
    return find_cycles(graph, sorted(graph))


def test_every_room_is_on_a_floor():
    """Each folder and root module of sdpo_kit is placed in ``FLOORS`` (a new room must be given its floor),
    and ``FLOORS`` names no room that does not exist."""
    rooms = {room(name) for name in MODULES}
    assert rooms - set(FLOOR) == set(), f"rooms without a floor (add them to FLOORS): {sorted(rooms - set(FLOOR))}"
    assert set(FLOOR) - rooms == set(), f"FLOORS names rooms that do not exist: {sorted(set(FLOOR) - rooms)}"


def test_every_arrow_points_down():
    """A module imports its own room or a room on a lower floor: nothing reaches up, nothing sideways."""
    bad = upward_arrows()
    assert not bad, "imports that go up a floor or sideways:\n" + "\n".join(bad)


def test_no_two_rooms_import_each_other():
    """No circle on the room graph: no room imports another that imports it back, directly or round a ring."""
    cycles = room_cycles()
    assert not cycles, "rooms in a circle:\n" + "\n".join(cycles)


def test_the_floor_checks_can_fail():
    """The two checks above are not blind: an import from the tasks up into vapor/ (what the lab did before
    vapor's task registered from its own package) is an arrow up and a circle with vapor -> tasks."""
    name = "sdpo_kit.tasks.arithmetic"
    bad = MODULES[name].read_text() + "\n\ndef _later():\n    from sdpo_kit.vapor import tasks  # noqa\n"
    arrows = upward_arrows({name: bad})
    assert arrows == ["sdpo_kit/tasks/arithmetic.py: import sdpo_kit.vapor.tasks (tasks, floor 4) -> vapor (floor 8)"], arrows
    assert any(c.startswith("tasks -> ") and "vapor" in c for c in room_cycles({name: bad})), room_cycles({name: bad})


def test_the_cli_is_a_thin_front():
    """``sdpo_kit/cli.py`` parses arguments and calls the library: at most 200 lines. ``train`` lives in
    ``sdpo_kit.training`` only (the public one is ``sdpo_kit.train``): the CLI keeps no second home for it."""
    from sdpo_kit import cli

    n = len((PKG / "cli.py").read_text().splitlines())
    assert n <= CLI_MAX_LINES, f"sdpo_kit/cli.py has {n} lines (at most {CLI_MAX_LINES}): move code to the library"
    assert not hasattr(cli, "train")


def test_no_module_is_named_like_a_test():
    """No module of sdpo_kit is called ``test_*.py`` or ``*_test.py`` (people and pytest read that as a test file)."""
    named = {p.relative_to(PKG.parent).as_posix() for p in PKG.rglob("test_*.py")} | \
            {p.relative_to(PKG.parent).as_posix() for p in PKG.rglob("*_test.py")}
    assert named == set(), sorted(named)


def test_the_scratch_grpo_config_is_not_named_like_trls():
    """One config class per algorithm and backend, ``<ALGORITHM><Backend>Config``, none named like a TRL class
    (``trl.GRPOConfig``, ``trl.experimental.sdpo.SDPOConfig``), no alias of an old name left behind, and each
    algorithm's config classes live in its ``config.py``."""
    import trl

    from sdpo_kit.grpo import config, loop

    assert not hasattr(config, "GRPOConfig") and not hasattr(loop, "GRPOConfig")
    trl_names = {n for n in dir(trl) if n.endswith(("Config", "Trainer"))} | {"SDPOConfig", "SDPOTrainer"}
    for algo, names in {"grpo": ("GRPOFields", "GRPOScratchConfig", "GRPOTRLConfig"),
                        "sdpo": ("SDPOFields", "SDPOScratchConfig", "SDPOTRLConfig"),
                        "vapor": ("VAPORFields", "VAPORScratchConfig", "VAPORTRLConfig"),
                        "ppo": ("PPOScratchConfig",)}.items():
        defined = {n.name for n in ast.parse((PKG / algo / "config.py").read_text()).body if isinstance(n, ast.ClassDef)}
        assert set(names) <= defined, (algo, set(names) - defined)
    ours = {n.name for p in PKG.rglob("*.py") for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.ClassDef)}
    assert "GRPOConfig" in trl_names and not ours & trl_names, ours & trl_names


def test_config_does_not_need_the_registry():
    """The registry needs the configs, not the other way round."""
    assert not [t for t, _ in imports("sdpo_kit.core.config") if t.startswith("sdpo_kit.registry")]
    assert any(t == "sdpo_kit.core.config" for t, _ in imports("sdpo_kit.registry"))


def test_one_folder_per_algorithm_with_its_loss():
    """Each algorithm has its room, and its math is in that room's loss.py."""
    for algo in ALGORITHMS:
        assert (PKG / algo / "__init__.py").exists(), algo
        assert (PKG / algo / "loss.py").exists(), algo


@pytest.mark.parametrize("room", ["core", "text", "sandbox", "lab", "rewards", "deploy", *ALGORITHMS])
def test_each_room_lists_its_files(room):
    """A newcomer finds the room for a change from its docstring: every file in it is named there."""
    doc = ast.get_docstring(ast.parse((PKG / room / "__init__.py").read_text())) or ""
    missing = [p.name for p in (PKG / room).glob("*.py") if p.name != "__init__.py" and p.name not in doc]
    assert not missing, f"sdpo_kit/{room}/__init__.py does not name {missing}"


def test_at_most_eight_modules_at_the_root():
    root = [p.name for p in PKG.glob("*.py")]
    assert len(root) <= 8, root


def scripts(room: str) -> list[Path]:
    """The Python files of a room beside the package (benchmarks/, reports/, tools/), results folders aside."""
    return [p for p in (PKG.parent / room).rglob("*.py") if "results" not in p.parts]


def test_no_file_over_400_lines():   # the package's, and the benchmarks', the reports' and the tools'
    files = [*PKG.rglob("*.py"), *scripts("benchmarks"), *scripts("reports"), *scripts("tools")]
    long = {str(p.relative_to(PKG.parent)): n for p in files if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_the_rooms_beside_the_package_stand_in_order():
    """tools/ (bench-check, re-measuring what is stale, CI on a fresh clone, the GPU wheels and lease) stands on
    reports/ (results to pages) and benchmarks/; reports/ stands on benchmarks/. Nothing imports back up: no
    benchmark imports a page renderer or a tool, no renderer a tool."""
    import ast

    tools = {p.stem for p in scripts("tools")}
    assert {"bench_check", "bench_stale", "bench_fresh_clone", "gpu_wheels"} <= tools
    above = {"benchmarks": tools | {"tools", "reports"}, "reports": tools | {"tools"}}
    back = {}
    for room, banned in above.items():
        for path in scripts(room):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                hits = [n for n in names if n.split(".")[0] in banned]
                if hits:
                    back[str(path.relative_to(PKG.parent))] = hits
    assert not back, back


def test_the_public_one_import_paths_work():
    from sdpo_kit.losses import gae, grpo_loss, sdpo_loss, vapor_loss
    from sdpo_kit.rewards import make_reward

    assert all(callable(f) for f in (gae, grpo_loss, sdpo_loss, vapor_loss, make_reward))
