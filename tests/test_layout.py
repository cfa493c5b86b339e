"""The layout CONTRIBUTING.md describes: a subpackage per layer, each module importing only its own layer and the
layers above it (lazy imports inside functions included), and no import cycles."""
import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "alfworld_rl"
FOUNDATION = ("core", "output", "run_lock", "settings")
LAYERS = ("foundation", "env", "rl", "backends", "runs", "mini", "cli")    # top to bottom


def module_name(path: Path) -> str:
    "`alfworld_rl/rl/ppo.py` -> `rl.ppo`."
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def layer_of(module: str) -> str:
    "The layer a module belongs to: its subpackage, `foundation` for the top modules, `cli`."
    top = module.split(".")[0]
    return "foundation" if top in FOUNDATION else top


def modules() -> dict[str, Path]:
    "Every module of the package but the generated index and the package markers."
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if p.name not in ("__init__.py", "_modidx.py")}


def imported(path: Path) -> set[str]:
    "The package modules `path` imports, at the top or inside functions."
    me = module_name(path).split(".")
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom):
            if node.level:                                   # relative: resolved against the module's package
                base = me[:len(me) - node.level]
                names = [".".join(base + [node.module])] if node.module else [".".join(base + [a.name]) for a in node.names]
            elif node.module and node.module.startswith("alfworld_rl."):
                names = [node.module[len("alfworld_rl."):]]
                names += [f"{names[0]}.{a.name}" for a in node.names]      # `from alfworld_rl.rl import ppo`
            elif node.module == "alfworld_rl":
                names = [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name[len("alfworld_rl."):] for a in node.names if a.name.startswith("alfworld_rl.")]
        out.update(n for n in names if n)
    known = modules()
    return {n for n in out if n in known}


def test_every_module_belongs_to_a_layer():
    for name in modules(): assert layer_of(name) in LAYERS, name


def test_modules_import_only_their_layer_and_the_layers_above():
    wrong = []
    for name, path in modules().items():
        for dep in imported(path):
            if LAYERS.index(layer_of(dep)) > LAYERS.index(layer_of(name)):
                wrong.append(f"{name} ({layer_of(name)}) imports {dep} ({layer_of(dep)})")
    assert wrong == []


def test_no_import_cycles():
    graph = {name: imported(path) - {name} for name, path in modules().items()}
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open": cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state: visit(dep, stack + [dep])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state: visit(name, [name])
    assert cycles == []


def test_the_rule_is_the_one_contributing_states():
    text = (REPO / "CONTRIBUTING.md").read_text()
    assert "imports only modules of its own layer and of the layers above it" in text
    listed = re.findall(r"^\| (?:(\w+)/)?\d\d\w* \| `([\w.]+)` \|", text, re.M)
    assert {module for _, module in listed} == set(modules())        # the table lists every module, no more
    for folder, module in listed:
        assert (folder or "foundation") == layer_of(module) or (not folder and module == "cli"), module


@pytest.mark.parametrize("name", sorted(modules()))
def test_the_notebook_folder_is_the_layer(name):
    "A module's source notebook sits in the folder named like its subpackage (the top modules in nbs/ itself)."
    head = modules()[name].read_text().splitlines()[:4]
    source = next(line.split("File to edit: ")[1] for line in head if "File to edit: " in line).rstrip(".")
    folder = Path(source).parent.name
    assert folder == ("nbs" if "." not in name else name.split(".")[0]), (name, source)
