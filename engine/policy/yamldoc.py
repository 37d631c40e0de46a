"""YAML that remembers where every key came from, and refuses duplicate keys.

`load(path)` returns a `Doc`: plain Python data plus the file, line and column of every
key path, so a mistake found anywhere later can be reported as `file:line:col: path:
message` with a numbered excerpt, the way dbt reports its YAML errors.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import yaml

from engine.base.errors import PolicyError

Path = tuple  # a key path like ("passes", "decay", "rules", 1, "when")
# values a document may expand to once its aliases are followed: a policy has hundreds; an
# alias bomb (each level nine aliases of the one before) has billions from 300 bytes
MAX_VALUES = 20_000
MAX_BYTES = 1_000_000  # of a policy file: a shipped one has under 10,000


@dataclass(frozen=True)
class Mark:
    file: str
    line: int
    col: int


@dataclass
class Doc:
    data: object
    file: str
    values: dict = field(default_factory=dict)  # path -> Mark of the value
    keys: dict = field(default_factory=dict)  # path -> Mark of the key

    def mark(self, path: Path, of_key: bool = False) -> Mark | None:
        """The closest known position of `path` (walking up to a parent if needed)."""
        p = tuple(path)
        while True:
            found = (self.keys.get(p) if of_key else None) or self.values.get(p)
            if found or not p:
                return found
            p = p[:-1]

    def error(self, path: Path, message: str, of_key: bool = False) -> PolicyError:
        m = self.mark(path, of_key)
        if m is None:
            return PolicyError(message, self.file, 1, 1, dotted(path))
        return PolicyError(message, m.file, m.line, m.col, dotted(path), excerpt(m))


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def excerpt(m: Mark, around: int = 2) -> str:
    """Numbered lines around a mark with a caret under the column."""
    try:
        with open(m.file, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return ""
    if m.line > len(lines):  # an error at the end of the stream: show an empty last line
        lines.append("")
    lo, hi = max(1, m.line - around), min(len(lines), m.line + around)
    width = len(str(hi))
    rows = []
    for n in range(lo, hi + 1):
        rows.append(f"  {n:>{width}} | {lines[n - 1]}")
        if n == m.line:
            rows.append(f"  {' ' * width} | {' ' * max(0, m.col - 1)}^")
    return "\n".join(rows)


# libyaml's parser when PyYAML was built with it (the wheels are): the same nodes, values
# and marks, 10 ms less for a shipped policy, which every command that opens a store
# parses. A document it refuses is parsed again by PyYAML's own parser, whose errors are
# the ones policy authors are shown; so is one with a tab or a character PyYAML refuses.
_FAST = getattr(yaml, "CSafeLoader", None)


def _parsed(text: str):
    """(loader, root node) for `text`; the loader is the one to construct values with."""
    # libyaml takes a tab between flow tokens (`[a,\tb]`) that PyYAML refuses: a policy
    # must load the same with or without libyaml, so any tab goes to PyYAML
    if _FAST is not None and "\t" not in text and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        loader = _FAST(text)
        try:
            return loader, loader.get_single_node()
        except yaml.YAMLError:
            loader.dispose()
    loader = yaml.SafeLoader(text)  # the reader refuses some characters right away
    try:
        return loader, loader.get_single_node()
    except BaseException:
        loader.dispose()
        raise


def load(path: str, keys: frozenset[str] | None = None) -> Doc:
    """Parse a YAML file into a Doc; syntax errors and duplicate keys are PolicyErrors.
    `keys`: the top-level keys a file of this kind has (a policy's); a file with none of
    them at the start of a line is refused before it is parsed, quoting none of its lines
    (it may be a .env or a key file that a hostile `extends:` named)."""
    shown = os.path.relpath(path) if not os.path.isabs(str(path)) else str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PolicyError(f"cannot read policy: {exc.strerror}", shown, 1, 1) from None
    if len(data) > MAX_BYTES:
        raise PolicyError(f"a policy file is at most {MAX_BYTES:,} bytes", shown, 1, 1)
    try:  # newlines read as text mode reads them (excerpt() does)
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise PolicyError("a policy must be UTF-8 text", shown, line, 1) from None
    if keys is not None and not _has_key(text, keys):
        raise PolicyError(
            "not a policy: none of its lines starts with a policy's key ("
            + ", ".join(sorted(keys))
            + "); nothing of it is shown",
            shown,
            1,
            1,
        )
    loader = None
    try:
        loader, node = _parsed(text)
        if node is not None:
            _check_expansion(node, shown)
        doc = Doc(None, shown)
        doc.data = {} if node is None else _convert(node, (), doc, loader)
    except yaml.MarkedYAMLError as exc:
        mk = exc.problem_mark or exc.context_mark
        m = Mark(shown, mk.line + 1, mk.column + 1)
        msg = f"YAML syntax error: {exc.problem or exc.context}"
        raise PolicyError(msg, m.file, m.line, m.col, "", excerpt(m)) from None
    except yaml.YAMLError as exc:  # e.g. a character YAML does not allow (NUL)
        at = getattr(exc, "position", None)
        line = text.count("\n", 0, at) + 1 if isinstance(at, int) else 1
        raise PolicyError(f"YAML error: {getattr(exc, 'reason', exc)}", shown, line, 1) from None
    except RecursionError:
        raise PolicyError("YAML nested too deeply", shown, 1, 1) from None
    finally:
        if loader is not None:
            loader.dispose()
    return doc


def _has_key(text: str, keys: frozenset[str]) -> bool:
    """Whether a line of `text` starts with one of `keys` and a colon (quoted or not)."""
    pattern = r"^[\"']?(?:" + "|".join(map(re.escape, sorted(keys))) + r")[\"']?[ \t]*:"
    return re.search(pattern, text, re.M) is not None


def _check_expansion(root, shown: str) -> None:
    """Count the values `root` expands to, each shared (aliased) node counted once per use,
    in time linear in the document (sizes are memoised); refuse past MAX_VALUES, and
    refuse an alias inside its own anchor (it expands forever)."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise _refused(node, shown, "an alias refers to the node that contains it")
        open_.add(key)
        children = (
            node.value
            if isinstance(node, yaml.SequenceNode)
            else [x for pair in node.value for x in pair]
            if isinstance(node, yaml.MappingNode)
            else []
        )
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_VALUES:
                raise _refused(
                    node,
                    shown,
                    f"the document expands to more than {MAX_VALUES} values once its aliases are followed",
                )
        open_.discard(key)
        sizes[key] = total
        return total

    size(root)


def _refused(node, shown: str, why: str) -> PolicyError:
    m = Mark(shown, node.start_mark.line + 1, node.start_mark.column + 1)
    return PolicyError(f"YAML refused: {why}", m.file, m.line, m.col, "", excerpt(m))


def _mark(doc: Doc, node) -> Mark:
    return Mark(doc.file, node.start_mark.line + 1, node.start_mark.column + 1)


def _convert(node, path: Path, doc: Doc, loader):
    doc.values[path] = _mark(doc, node)
    if isinstance(node, yaml.MappingNode):
        out = {}
        for knode, vnode in node.value:
            key = loader.construct_object(knode, deep=True)
            kpath = path + (key,)
            if not isinstance(key, str) or key == "<<" or "\x00" in key:
                doc.keys[kpath] = _mark(doc, knode)
                raise doc.error(kpath, f"keys must be plain names, got {key!r}", of_key=True)
            if key in out:
                first = doc.keys[kpath].line
                doc.keys[kpath] = _mark(doc, knode)
                raise doc.error(kpath, f"duplicate key '{key}' (first given at line {first})", of_key=True)
            doc.keys[kpath] = _mark(doc, knode)
            out[key] = _convert(vnode, kpath, doc, loader)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(v, path + (i,), doc, loader) for i, v in enumerate(node.value)]
    value = loader.construct_object(node, deep=True)
    # "\0" in quotes: no path, name or formula holds one (opening such a path raised ValueError)
    if isinstance(value, str) and "\x00" in value:
        raise doc.error(path, "a NUL character (\\0) is not allowed in a policy")
    return value


def merge(base: Doc, child: Doc) -> Doc:
    """`extends`: the child's keys win; mappings merge deeply; lists are replaced whole."""
    out = Doc(_merge(base.data, child.data), child.file)
    for p, m in base.values.items():
        out.values[p] = m
    for p, m in base.keys.items():
        out.keys[p] = m
    _forget_replaced(out, child)
    out.values.update(child.values)
    out.keys.update(child.keys)
    return out


def _merge(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        merged = dict(a)
        for k, v in b.items():
            merged[k] = _merge(a[k], v) if k in a else v
        return merged
    return b


def _forget_replaced(out: Doc, child: Doc) -> None:
    # positions under a list the child replaced belong to the base's list: drop them
    lists = [p for p, m in child.values.items() if _is_list_at(child.data, p)]
    for lp in lists:
        for table in (out.values, out.keys):
            for p in [p for p in table if p[: len(lp)] == lp and len(p) > len(lp)]:
                del table[p]


def _is_list_at(data, path: Path) -> bool:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return False
    return isinstance(data, list)
