"""Prompt templates: Jinja in a sandbox, strict about undefined names.

Memory text reaches a template only as data (variables), never as template source, so a
memory that contains `{{ ... }}` is printed, not run. Syntax errors carry the template
file and line. A template is read only from inside its prompt folder: a link that leads
out of it (to /etc/passwd, to a secret) is refused, at validation and at render time.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache

from .errors import PolicyError
from .lazy import lazy

# Jinja is imported when a template is first parsed: a policy loaded for passes of rules
# alone (`lethe run --pass decay`) never pays its ~30-60 ms (engine.policy.load)
jinja2 = lazy("jinja2")
sandbox = lazy("jinja2.sandbox")
meta = lazy("jinja2.meta")


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
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


@lru_cache(maxsize=1)
def _confined_loader() -> type:
    """A FileSystemLoader that serves templates (and what they include) only from inside
    their prompt folders (a class made once, when Jinja is first needed)."""

    class ConfinedLoader(jinja2.FileSystemLoader):
        def get_source(self, environment, template):
            source, filename, uptodate = super().get_source(environment, template)
            if not any(inside(filename, d) for d in self.searchpath):
                raise jinja2.TemplateNotFound(
                    f"{template} (a link leading out of its prompt folder)")
            return source, filename, uptodate
    return ConfinedLoader


@lru_cache(maxsize=32)
def environment(dirs: tuple[str, ...]):
    """The sandboxed Jinja environment for these prompt folders (StrictUndefined)."""
    env = sandbox.ImmutableSandboxedEnvironment(
        loader=_confined_loader()(list(dirs)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["tojson"] = _tojson
    return env


def find(name: str, dirs: tuple[str, ...]) -> str | None:
    """The file a template name stands for: in the first prompt folder that has it, and
    only if it stays inside that folder (a link out of it is never read)."""
    found = _first(name, dirs)
    return found[1] if found and inside(found[1], found[0]) else None


def _first(name: str, dirs: tuple[str, ...]) -> tuple[str, str] | None:
    """(folder, file) of the first prompt folder that has `name`."""
    if not _plain(name):
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


def _plain(name: str) -> bool:
    """A template name is a path inside the prompt folders: no absolute paths, no '..'."""
    parts = name.replace("\\", "/").split("/")
    return bool(name) and not os.path.isabs(name) and ".." not in parts and "\x00" not in name


def check(name: str, dirs: tuple[str, ...]) -> None:
    """Parse a template: a missing file or a syntax error is a PolicyError at file:line."""
    locate(name, dirs)
    parse(name, dirs)


def locate(name: str, dirs: tuple[str, ...]) -> str:
    """The file a template name stands for, checked without Jinja: a name outside the
    prompt folders, a link out of them or a missing file is a PolicyError."""
    if not _plain(name):
        raise PolicyError(f"template '{name}' must be a name inside the prompt folders "
                          "(no absolute path, no '..')")
    if _escaping(name, dirs):
        raise PolicyError(f"template '{name}' is a link that leads out of its prompt folder "
                          f"(to {_escaping(name, dirs)}): refused")
    path = find(name, dirs)
    if path is None:
        raise PolicyError(f"template '{name}' not found in {', '.join(dirs) or '(no prompt dirs)'}")
    return path


def parse(name: str, dirs: tuple[str, ...]) -> None:
    """Parse (and compile) a template `locate` found: a syntax error is a PolicyError at
    the template's file and line."""
    path = find(name, dirs) or name
    try:
        environment(dirs).get_template(name)
    except jinja2.TemplateNotFound as exc:
        raise PolicyError(f"template '{exc.name}' not found in {', '.join(dirs)}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise PolicyError(f"template syntax error: {exc.message}",
                          os.path.relpath(path), exc.lineno, 1) from None


def check_variables(name: str, dirs: tuple[str, ...], given: dict, step: str) -> None:
    """A template uses only the variables its step gives (`given`: an example value of
    each): rendered with them, a name the step does not give (or a field its values lack,
    `memory.contnt`) is a PolicyError at the template's line, found now rather than at the
    first call. Names a template guards (`x | default(3)`, `x is defined`) are optional."""
    env = environment(dirs)
    _, path, _ = env.loader.get_source(env, name)
    try:
        env.get_template(name).render(**given)
    except jinja2.UndefinedError as exc:
        raise PolicyError(f"template uses an undefined name: {exc.message} (step '{step}' "
                          "gives: " + ", ".join(given) + ")", os.path.relpath(path),
                          _line_of(exc), 1) from None
    except Exception:  # noqa: BLE001 - sandbox refusals and the like depend on real values:
        pass           # rendering for real reports them (and keeps the work pending)


def used_names(name: str, dirs: tuple[str, ...]) -> list[str]:
    """The variables a template reads (itself, not what it includes), sorted: what
    `lethe render` must be given."""
    env = environment(dirs)
    source, _, _ = env.loader.get_source(env, name)
    return sorted(meta.find_undeclared_variables(env.parse(source)))


def render(name: str, dirs: tuple[str, ...], variables: dict) -> str:
    """Render a template with variables; an undefined name or a sandbox violation is a PolicyError."""
    path = find(name, dirs) or name
    try:
        return environment(dirs).get_template(name).render(**variables).strip() + "\n"
    except jinja2.TemplateSyntaxError as exc:
        raise PolicyError(f"template syntax error: {exc.message}", os.path.relpath(path),
                          exc.lineno, 1) from None
    except jinja2.UndefinedError as exc:
        raise PolicyError(f"template uses an undefined name: {exc.message}",
                          os.path.relpath(path), _line_of(exc), 1) from None
    except jinja2.exceptions.SecurityError as exc:
        raise PolicyError(f"template tried something the sandbox forbids: {exc}",
                          os.path.relpath(path), _line_of(exc), 1) from None
    except (OverflowError, ArithmeticError, TypeError, ValueError, LookupError) as exc:
        raise PolicyError(f"template failed: {type(exc).__name__}: {exc}",
                          os.path.relpath(path), _line_of(exc), 1) from None


def _line_of(exc: BaseException) -> int:
    tb = exc.__traceback__
    line = 1
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith((".j2", ".jinja", ".txt")):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
