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
    # top level: the module's body, and a top-level `if TYPE_CHECKING:` block (types only)
    top = {id(n) for n in tree.body} | {
        id(m)
        for n in tree.body
        if isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING"
        for m in n.body
    }
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
    """Only packages at the top (the façade too: engine/memory/): no loose modules beside them."""
    loose = sorted(p.name for p in ENGINE.glob("*.py") if p.name != "__init__.py")
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


# A compiled statement says what it is (engine.plan.statement: kind, event, rule); its SQL
# text and label are for the database and for people. Outside engine/plan/ they are passed
# along, never inspected: no `st.sql.startswith(...)`, `"x" in st.sql`, `st.label.split()`,
# `st.params[0]`. The judges hold no statements (their `label`s are date mentions' words),
# and no statement is `self` there (the SQLite store's `self.sql` is its DB-API module).
STATEMENT_TEXT = {"sql": {"plan"}, "label": {"plan", "judges"}}
DIALECT_NAMES = {"sqlite", "postgres"}


def statement_and_dialect_readings(source: str, unit_: str) -> list[str]:
    """Lines that decide something from a statement's text, label or parameter positions,
    or from a backend's name (`d.name == "sqlite"`, `self.dialect != "postgres"`) instead of
    its capabilities."""
    tree = ast.parse(source)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        up = parents.get(id(node))
        if (
            isinstance(node, ast.Attribute)
            and unit_ not in STATEMENT_TEXT.get(node.attr, {unit_})
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")  # a store's own
        ):
            if (
                isinstance(up, ast.Attribute)  # st.sql.startswith(...), st.label.split(...)
                or (isinstance(up, ast.Subscript) and up.value is node)  # st.sql[:6]
                or isinstance(up, ast.Compare)  # "memory_events" in st.sql, st.label == ...
                or (isinstance(up, ast.Call) and node in up.args and _is_re(up.func))
            ):
                found.append(f"line {node.lineno}: reads .{node.attr}")
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "params"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, int)
            and unit_ != "plan"
        ):
            found.append(f"line {node.lineno}: reads a statement's parameter by position")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            # any comparison with a backend's name (`d.name ==`, `self.dialect !=`,
            # `backend in ("sqlite", ...)`): what is asked is a capability or a method
            constants = [s for s in sides if isinstance(s, ast.Constant)]
            constants += [e for s in sides if isinstance(s, (ast.Tuple, ast.List, ast.Set)) for e in s.elts]
            if any(isinstance(c, ast.Constant) and c.value in DIALECT_NAMES for c in constants):
                found.append(f"line {node.lineno}: compares a dialect's name")
    return found


def _is_re(func: ast.AST) -> bool:
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "re"


def test_nothing_reads_a_statements_text_or_a_dialects_name():
    readings = {
        module: found
        for module, path in MODULES.items()
        if (found := statement_and_dialect_readings(path.read_text(encoding="utf-8"), unit(module)))
    }
    assert readings == {}


@pytest.mark.parametrize(
    "line",
    [
        'if st.sql.startswith("INSERT INTO memory_events"): pass',
        'if "UPDATE memories" in st.sql: pass',
        'rule = st.label.split(" update")[0]',
        "event = st.params[0]",
        'if d.name == "sqlite": pass',
        'if plan.dialect.name != "postgres": pass',
        'if self.dialect == "sqlite": pass',
        'pg = dst.dialect != "postgres"',
        'if backend in ("sqlite", "postgres"): pass',
        "found = re.match('UPDATE', st.sql)",
    ],
)
def test_the_text_reading_check_finds_what_it_forbids(line):
    assert statement_and_dialect_readings(line, "run") != []
    assert statement_and_dialect_readings("run(st.sql, st.bind(now))\nprogress(st.label)", "run") == []
