"""The shape of the engine, checked from its source: layers that import only downwards, no
import cycles, no imports hidden inside functions, SQL executed only by the store, and
modules small enough to read in one sitting (docs/design.md has the map)."""

from __future__ import annotations

import ast
import pathlib

import pytest

ENGINE = pathlib.Path(__file__).resolve().parent.parent / "engine"

# bottom to top, the data flow: a policy is compiled into a plan, run against a store with
# judges' answers, behind the Memory façade; the apps, integrations and the CLI sit on top.
# A package may import its own modules (without cycles) and lower packages.
LAYERS = [
    {"shipped"},  # the policies and templates that travel in the wheel (data)
    {"base"},  # errors, clock, text, inputs, tracing: what every layer uses
    {"steps", "prompts"},  # what a judgment asks and what its answer must look like
    {"policy"},  # YAML + formulas -> a checked Policy
    {"plan"},  # Policy -> SQL statements for a dialect
    {"store"},  # the database: SQLite and PostgreSQL behind one protocol
    {"judges"},  # models and the offline rules that answer the steps
    {"run"},  # write, recall, passes, compress, runners, scheduler
    {"memory"},  # the façade: the one door to all of the above
    {"apps", "integrations"},  # experiments, demo, chat, inspector; LangGraph, MCP
    {"cli"},
    {"__init__"},
]
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units}
MAX_LINES = 500


def modules() -> dict[str, pathlib.Path]:
    """Dotted module name (engine.x.y) -> file, for every module of the engine."""
    out = {}
    for path in sorted(ENGINE.rglob("*.py")):
        rel = path.relative_to(ENGINE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


def unit(module: str) -> str:
    """The layer unit of a module: engine.store.sqlite.sqlite_store -> store; engine -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported(module: str, path: pathlib.Path) -> list[tuple[str, ast.AST, bool]]:
    """Engine modules `module` imports: (target, node, at top level)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        if _is_lazy(node):  # `x = lazy("engine.a.b")`: an import, made on first use
            targets = [node.args[0].value]
            top_lazy = any(isinstance(n, ast.Assign) and n.value is node for n in tree.body)
            found.extend((t, node, top_lazy) for t in targets if t in MODULES)
            continue
        for t in targets:
            if t == "engine" or t.startswith("engine."):
                while t not in MODULES and "." in t:
                    t = t.rpartition(".")[0]
                found.append((t, node, id(node) in top))
    return found


def _is_lazy(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "lazy"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


GRAPH = {m: imported(m, p) for m, p in MODULES.items()}


def test_lazy_imports_are_seen_as_imports():
    """engine.judges.providers declares the rules judges lazily; the checks still see that edge."""
    assert ("engine.judges.rules.adapter", True) in {
        (t, top) for t, _, top in GRAPH["engine.judges.providers"]
    }


def test_the_top_of_the_engine_reads_as_the_pipeline():
    """Only packages (and the façade) at the top: no loose modules beside them."""
    loose = sorted(p.name for p in ENGINE.glob("*.py") if p.name not in {"__init__.py", "memory.py"})
    assert loose == []


def test_file_names_are_unique():
    """A file name says what the file is, once: no two engine modules share a name."""
    seen: dict[str, list[str]] = {}
    for path in MODULES.values():
        if path.name != "__init__.py":
            seen.setdefault(path.name, []).append(str(path.relative_to(ENGINE)))
    assert {n: ps for n, ps in seen.items() if len(ps) > 1} == {}


def test_every_unit_has_a_layer():
    assert {unit(m) for m in MODULES} - set(LAYER) == set()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_upward_imports(module):
    mine = LAYER[unit(module)]
    upward = sorted({t for t, _, _ in GRAPH[module] if unit(t) != unit(module) and LAYER[unit(t)] > mine})
    assert upward == [], f"{module} (layer {mine}) imports from a higher layer"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_imports_inside_functions(module):
    hidden = [f"line {n.lineno}: {t}" for t, n, top in GRAPH[module] if not top]
    assert hidden == [], "imports of the project's own modules hide inside functions"


def test_no_import_cycles():
    edges = {m: {t for t, _, _ in GRAPH[m] if t != m and not _is_parent(t, m)} for m in MODULES}
    seen, stack, cycles = set(), [], []

    def visit(m):
        if m in stack:
            cycles.append(stack[stack.index(m) :] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for t in sorted(edges[m]):
            visit(t)
        stack.pop()

    for m in sorted(MODULES):
        visit(m)
    assert cycles == []


def _is_parent(target: str, module: str) -> bool:
    """Importing a module runs its package's __init__ first; that is not an edge back."""
    return module.startswith(target + ".")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_are_small_enough_to_read(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module}: {lines} lines"


def test_only_the_store_executes_sql():
    """Outside engine/store/, SQL runs only as compiled statements handed to the store."""
    calls = []
    for module, path in MODULES.items():
        if unit(module) == "store":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("execute", "executemany", "executescript")
            ):
                calls.append(f"{module}:{node.lineno}")
    assert calls == []
