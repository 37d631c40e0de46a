"""Prompt templates: Jinja in a sandbox, strict about undefined names, bounded in its work.

Memory text reaches a template only as data (variables), never as template source, so a
memory that contains `{{ ... }}` is printed, not run. Syntax errors carry the template
file and line. A policy is hostile input, and so are the templates it names:
- a template is read only from inside its prompt folder (a link that leads out of it, to
  /etc/passwd or a secret, is refused), only when it is named like a template
  (TEMPLATE_SUFFIXES) through no hidden file or folder (`.ssh/id_rsa`, `.env`), and only
  when it is a regular file of at most MAX_TEMPLATE_BYTES: a lone policy that climbs to a
  home folder with `prompts: ".."` still reads no key;
- a template that includes, imports or extends itself (through others too) is refused
  when it is parsed;
- one render does bounded work (engine.prompts.budget): a template that loops for ever,
  builds a gigabyte or recurses without end is a PolicyError at its file and line;
- data never makes a render fail: each text a prompt shows is cut to PROMPT_TEXT
  characters, saying how many are left out (`shortened`).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import TYPE_CHECKING

from engine.base.errors import PolicyError
from engine.base.lazy import lazy
from engine.base.resources import NotReadable, read_regular
from engine.prompts.budget import TooMuchWork, bounded_environment

# Jinja is imported when a template is first parsed: a policy loaded for passes of rules
# alone (`lethe run --pass decay`) never pays its ~30-60 ms (engine.policy.load)
if TYPE_CHECKING:  # the modules themselves, for the type checker
    import jinja2
    from jinja2 import meta, nodes
else:  # imported on first use
    jinja2 = lazy("jinja2")
    meta = lazy("jinja2.meta")
    nodes = lazy("jinja2.nodes")

TEMPLATE_SUFFIXES = (".j2", ".jinja", ".jinja2")  # what the shipped prompts use, and Jinja's
MAX_TEMPLATE_BYTES = 1_000_000
PROMPT_TEXT = 20_000  # characters of one text a prompt shows (a memory, a turn); the rest cut
PROMPT_TOTAL = 1_000_000  # characters of every text one prompt shows, together


# JSON leaves these raw, but they end a line for many readers (str.splitlines, JavaScript):
# escaped, memory text cannot start a line of its own in a prompt
_LINE_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _tojson(value) -> str:
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()  # StrictUndefined: name the missing variable
    text = json.dumps(value, ensure_ascii=False, default=str)
    for raw, escaped in _LINE_BREAKS.items():
        text = text.replace(raw, escaped)
    return text


def inside(path: str, folder: str) -> bool:
    """`path`, links followed, is `folder` (links followed) or somewhere under it."""
    try:
        real, top = os.path.realpath(path), os.path.realpath(folder)
    except ValueError:  # a NUL in either: no such place
        return False
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


# ---- which files are templates -------------------------------------------------------------
def _refused_name(name) -> str | None:
    """Why `name` cannot be a template name, or None: it must be a relative path inside the
    prompt folders, through no hidden file or folder, ending like a template."""
    if not isinstance(name, str) or not name or "\x00" in name or os.path.isabs(name):
        return "must be a name inside the prompt folders (no absolute path, no '..')"
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        return "must be a name inside the prompt folders (no absolute path, no '..')"
    if any(p.startswith(".") and p != "." for p in parts):
        return "names a hidden file or folder (a part starting with '.'): refused"
    if not name.lower().endswith(TEMPLATE_SUFFIXES):
        return f"is not a prompt template (a template's name ends in {', '.join(TEMPLATE_SUFFIXES)})"
    return None


def _read(path: str) -> str:
    """A template file's text: a regular file of at most MAX_TEMPLATE_BYTES."""
    data = read_regular(path, MAX_TEMPLATE_BYTES)  # NotReadable: no regular file, too large
    # newlines as text mode reads them (Jinja's own loader did)
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _mtime(path: str) -> float | None:
    try:
        return os.path.getmtime(path)
    except OSError:
        return None


@lru_cache(maxsize=1)
def _confined_loader() -> type:
    """A loader that serves templates (and what they include) only from inside their
    prompt folders, and only files `_refused_name` and `_read` accept (a class made once,
    when Jinja is first needed)."""

    class ConfinedLoader(jinja2.BaseLoader):
        def __init__(self, dirs):
            self.dirs = tuple(dirs)

        def get_source(self, environment, template):
            why = _refused_name(template)
            found = None if why else _first(template, self.dirs)
            if found is None:
                raise jinja2.TemplateNotFound(f"{template} ({why})" if why else template)
            folder, path = found
            if not inside(path, folder):
                raise jinja2.TemplateNotFound(f"{template} (a link leading out of its prompt folder)")
            try:
                source = _read(path)
            except (NotReadable, OSError, UnicodeDecodeError) as exc:
                raise jinja2.TemplateNotFound(f"{template} ({exc})") from None
            mtime = _mtime(path)
            return source, os.path.normpath(path), lambda: _mtime(path) == mtime

    return ConfinedLoader


@lru_cache(maxsize=32)
def environment(dirs: tuple[str, ...]):
    """The sandboxed, bounded Jinja environment for these prompt folders (StrictUndefined)."""
    env = bounded_environment()(
        loader=_confined_loader()(list(dirs)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["tojson"] = _tojson
    return env


# ---- finding, parsing and rendering ----------------------------------------------------------
def find(name: str, dirs: tuple[str, ...]) -> str | None:
    """The file a template name stands for: in the first prompt folder that has it, and
    only if it stays inside that folder (a link out of it is never read)."""
    found = _first(name, dirs)
    return found[1] if found and inside(found[1], found[0]) else None


def _first(name: str, dirs: tuple[str, ...]) -> tuple[str, str] | None:
    """(folder, file) of the first prompt folder that has `name`."""
    if _refused_name(name):
        return None
    for d in dirs:
        path = os.path.join(d, name)
        if os.path.isfile(path):
            return d, path
    return None


def _escaping(name: str, dirs: tuple[str, ...]) -> str | None:
    """Where a template name leads when the file it stands for is a link out of its
    folder (it shadows any later folder's file of that name: refused, not skipped)."""
    found = _first(name, dirs)
    return os.path.realpath(found[1]) if found and not inside(found[1], found[0]) else None


def check(name: str, dirs: tuple[str, ...]) -> None:
    """Parse a template: a missing file or a syntax error is a PolicyError at file:line."""
    locate(name, dirs)
    parse(name, dirs)


def locate(name: str, dirs: tuple[str, ...]) -> str:
    """The file a template name stands for, checked without Jinja: a name outside the
    prompt folders, a hidden or non-template file, a link out of the folders, a missing,
    irregular or too large file is a PolicyError."""
    why = _refused_name(name)
    if why:
        raise PolicyError(f"template '{name}' {why}")
    if _escaping(name, dirs):
        raise PolicyError(
            f"template '{name}' is a link that leads out of its prompt folder "
            f"(to {_escaping(name, dirs)}): refused"
        )
    path = find(name, dirs)
    if path is None:
        raise PolicyError(f"template '{name}' not found in {', '.join(dirs) or '(no prompt dirs)'}")
    try:
        _read(path)
    except (NotReadable, OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"template '{name}' {_unreadable(exc)}: refused") from None
    return path


def _unreadable(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "is not UTF-8 text"
    return (
        str(exc)
        if isinstance(exc, NotReadable)
        else f"cannot be read ({exc.strerror if isinstance(exc, OSError) else exc})"
    )


def parse(name: str, dirs: tuple[str, ...]) -> None:
    """Parse (and compile) a template `locate` found: a syntax error, or a template that
    includes itself, is a PolicyError at the template's file and line."""
    path = find(name, dirs) or name
    env = environment(dirs)
    try:
        env.get_template(name)
    except jinja2.TemplateNotFound as exc:
        raise PolicyError(f"template '{exc.name}' not found in {', '.join(dirs)}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise PolicyError(
            f"template syntax error: {exc.message}", os.path.relpath(path), exc.lineno, 1
        ) from None
    try:
        cycle = _cycle(env, name)
    except RecursionError:  # a chain of hundreds of templates, each including the next
        raise PolicyError(
            "template includes templates nested too deeply", os.path.relpath(path), 1, 1
        ) from None
    if cycle:
        line, chain = cycle
        raise PolicyError(
            f"template includes itself: {' -> '.join(chain)} (it would never finish rendering)",
            os.path.relpath(path),
            line,
            1,
        )


def _references(env, name: str) -> list[tuple[str, int]]:
    """(template, line) of each include, import and extends in `name` whose template is
    written out; one that cannot be read or parsed has none (rendering reports it)."""
    try:
        tree = env.parse(env.loader.get_source(env, name)[0])
    except jinja2.TemplateError:
        return []
    out = []
    for node in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        names = (
            node.template.items if isinstance(node.template, (nodes.Tuple, nodes.List)) else [node.template]
        )
        out += [
            (n.value, node.lineno) for n in names if isinstance(n, nodes.Const) and isinstance(n.value, str)
        ]
    return out


def _cycle(env, top: str) -> tuple[int, list[str]] | None:
    """(line in `top`, chain) of a reference from `top` that leads into a cycle."""
    done: set[str] = set()

    def walk(name: str, chain: list[str]) -> list[str] | None:
        if name in chain[:-1]:
            return chain
        if name in done:
            return None
        for ref, _ in _references(env, name):
            found = walk(ref, chain + [ref])
            if found:
                return found
        done.add(name)
        return None

    for ref, line in _references(env, top):
        found = walk(ref, [top, ref])
        if found:
            return line, found
    return None


def check_variables(name: str, dirs: tuple[str, ...], given: dict, step: str) -> None:
    """A template uses only the variables its step gives (`given`: an example value of
    each): rendered with them, a name the step does not give (or a field its values lack,
    `memory.contnt`) is a PolicyError at the template's line, found now rather than at the
    first call. Names a template guards (`x | default(3)`, `x is defined`) are optional.
    A render that does too much work, or recurses without end, is refused now too."""
    env = environment(dirs)
    _, path, _ = env.loader.get_source(env, name)
    try:
        env.get_template(name).render(**given)
    except jinja2.UndefinedError as exc:
        raise PolicyError(
            f"template uses an undefined name: {exc.message} (step '{step}' gives: " + ", ".join(given) + ")",
            os.path.relpath(path),
            _line_of(exc),
            1,
        ) from None
    except (TooMuchWork, RecursionError, MemoryError) as exc:
        raise _unbounded(exc, path) from None
    except Exception:  # sandbox refusals and the like depend on real values:
        pass  # rendering for real reports them (and keeps the work pending)


def _unbounded(exc: BaseException, path: str) -> PolicyError:
    """A render that went past its bounds, said at the template's file and line."""
    if isinstance(exc, RecursionError):
        why = (
            "template recursion too deep (a template that includes itself, or a macro "
            "that calls itself without end)"
        )
    elif isinstance(exc, MemoryError):
        why = "template ran out of memory"
    else:
        why = f"template does too much work: {exc}"
    return PolicyError(why, os.path.relpath(path), _line_of(exc), 1)


def used_names(name: str, dirs: tuple[str, ...]) -> list[str]:
    """The variables a template reads (itself, not what it includes), sorted: what
    `lethe render` must be given."""
    env = environment(dirs)
    source, _, _ = env.loader.get_source(env, name)
    return sorted(meta.find_undeclared_variables(env.parse(source)))


def shortened(value, limit: int = PROMPT_TEXT):
    """`value` (variables: dicts, lists, texts) with each text longer than `limit` cut to
    it and ended with how much is left out, so data never makes a template fail nor a
    prompt huge; when the cut texts still pass PROMPT_TOTAL together, cut shorter. The
    values themselves are not changed (the rules judges read them whole)."""
    if limit == PROMPT_TEXT:
        count, total = _texts(value)
        if total > PROMPT_TOTAL:
            limit = max(200, PROMPT_TOTAL // max(count, 1))
    return _cut(value, limit)


def _cut(value, limit: int):
    """`value` with each text longer than `limit` cut to it (the limit chosen once, for the
    whole of what `shortened` was given: counting again at every level cost a recall's
    select prompt over 60 candidates a fifth of its time)."""
    if isinstance(value, str):
        return (
            value
            if len(value) <= limit
            else f"{value[:limit]}… [{len(value) - limit:,} more characters not shown]"
        )
    if isinstance(value, dict):
        return {k: _cut(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cut(v, limit) for v in value)
    return value


def _texts(value) -> tuple[int, int]:
    """How many texts `value` holds, and their length once each is cut to PROMPT_TEXT."""
    if isinstance(value, str):
        return 1, min(len(value), PROMPT_TEXT)
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    count = total = 0
    for item in items:
        c, t = _texts(item)
        count, total = count + c, total + t
    return count, total


def render(name: str, dirs: tuple[str, ...], variables: dict) -> str:
    """Render a template with variables, each long text cut (`shortened`); an undefined
    name, a sandbox violation or a render past its bounds is a PolicyError."""
    path = find(name, dirs) or name
    try:
        return environment(dirs).get_template(name).render(**shortened(variables)).strip() + "\n"
    except jinja2.TemplateSyntaxError as exc:
        raise PolicyError(
            f"template syntax error: {exc.message}", os.path.relpath(path), exc.lineno, 1
        ) from None
    except jinja2.UndefinedError as exc:
        raise PolicyError(
            f"template uses an undefined name: {exc.message}", os.path.relpath(path), _line_of(exc), 1
        ) from None
    except jinja2.exceptions.SecurityError as exc:
        raise PolicyError(
            f"template tried something the sandbox forbids: {exc}", os.path.relpath(path), _line_of(exc), 1
        ) from None
    except (TooMuchWork, RecursionError, MemoryError) as exc:
        raise _unbounded(exc, path) from None
    except (OverflowError, ArithmeticError, TypeError, ValueError, LookupError) as exc:
        raise PolicyError(
            f"template failed: {type(exc).__name__}: {exc}", os.path.relpath(path), _line_of(exc), 1
        ) from None


def _line_of(exc: BaseException) -> int:
    tb = exc.__traceback__
    line = 1
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(TEMPLATE_SUFFIXES):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
