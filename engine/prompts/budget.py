"""The work one render may do: a template that loops for ever, builds a gigabyte or
recurses without end is refused, not run until the process is killed.

One render (and everything it includes or imports) has MAX_STEPS steps: each loop turn,
each call and each range() item is one. Each value it builds with `*`, `+`, `~`, `%`, a
str method or a filter that sizes its result (center, indent, replace, join...) is at
most MAX_SIZE characters or items, checked before it is built; so is its output; and all
it builds (filters, methods and slices counted too) is at most MAX_TOTAL. A number
`**` builds has at most MAX_BITS bits. MAX_SECONDS is the backstop for work no step counts.
A prompt needs a few thousand steps and well under a megabyte. Every refusal is a
`TooMuchWork`, which engine.prompts turns into a PolicyError at the template's line.
"""

from __future__ import annotations

import contextvars
import functools
import math
import re
import string
import time
import types
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from engine.base.lazy import lazy

if TYPE_CHECKING:  # the modules themselves, for the type checker
    import jinja2
    from jinja2 import nodes, sandbox
else:  # imported on first use
    jinja2 = lazy("jinja2")
    sandbox = lazy("jinja2.sandbox")
    nodes = lazy("jinja2.nodes")

MAX_STEPS = 200_000  # loop turns, calls and range() items
MAX_SIZE = 10_000_000  # characters (or items) of one value a template builds, or of its output
MAX_BITS = 100_000  # of a number `**` builds
MAX_SECONDS = 10.0  # the backstop for work no step counts (a filter over a long text)
MAX_TOTAL = 50_000_000  # characters (or items) of every value one render builds, together:
# what bounds its memory, whatever values it keeps


class TooMuchWork(Exception):
    """A render went past one of the bounds above."""


class _Work:
    """What is left to one render (shared by everything it includes or imports)."""

    def __init__(self):
        self.steps, self.deadline = MAX_STEPS, time.monotonic() + MAX_SECONDS
        self.built = 0  # characters or items built so far, freed or kept


_WORK: contextvars.ContextVar = contextvars.ContextVar("lethe_render_work", default=None)


def _spend(steps: int) -> None:
    work = _WORK.get()
    if work is None:  # Jinja folding a constant while it compiles: no render to bound
        return
    work.steps -= steps
    if work.steps < 0:
        raise TooMuchWork(f"more than {MAX_STEPS:,} loop turns, calls and range() items")
    if time.monotonic() > work.deadline:
        raise TooMuchWork(f"it ran for more than {MAX_SECONDS:g} seconds")


def _size(n: int) -> None:
    if n > MAX_SIZE:
        raise TooMuchWork(f"a value of {n:,} characters or items (at most {MAX_SIZE:,})")
    _built(n)


def _built(n: int) -> None:
    """Count `n` characters or items built towards the render's MAX_TOTAL."""
    work = _WORK.get()
    if work is None or n <= 0:
        return
    work.built += n
    if work.built > MAX_TOTAL:
        raise TooMuchWork(
            f"values of {work.built:,} characters or items in all (at most {MAX_TOTAL:,} in one render)"
        )


def _counted(value):
    """`value`, its size counted towards MAX_TOTAL when it is text or a sequence (what a
    filter, a method or a slice built, whatever its size)."""
    if isinstance(value, _SEQUENCES):
        _built(len(value))
    return value


def _counting_filter(f):
    @functools.wraps(f)
    def counted(*args, **kwargs):
        return _counted(f(*args, **kwargs))

    return counted


def _width(n) -> int:
    return n if isinstance(n, int) else 0


def _replaced(s, old, new, count=None) -> int:
    times = len(s) + 1 if old == "" else len(s) // len(old)
    if isinstance(count, int) and count >= 0:
        times = min(times, count)
    return len(s) + len(new) * times


_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _percent(fmt: str, args) -> None:
    """A `%` format's widths and precisions stay within MAX_SIZE (`*` takes them from args)."""
    for m in _PERCENT.finditer(fmt):
        for given in m.groups():
            if given == "*":
                values = args if isinstance(args, tuple) else (args,)
                _size(max([abs(v) for v in values if isinstance(v, int)] or [0]))
            elif given:
                _size(int(given))


def _percent_size(fmt: str, args) -> int:
    """`_percent`'s check, as a size filter answers: what it adds beyond its input (0)."""
    _percent(fmt, args)
    return 0


def _format(fmt: str) -> None:
    """A str.format string's widths stay within MAX_SIZE; none is taken from an argument."""
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:  # malformed: str.format says so itself
        return
    for _, _, spec, _ in fields:
        if spec and "{" in spec:
            raise TooMuchWork("a format width taken from an argument ('{:{}}') is refused")
        for number in re.findall(r"\d+", spec or ""):
            _size(int(number))


def _binop(operator: str, left, right) -> None:
    """The size of what `*`, `+`, `**` or `%` would build, refused before it is built."""
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, _SEQUENCES) and isinstance(n, int):
                _size(len(seq) * max(n, 0))
    elif operator == "+" and all(isinstance(x, _SEQUENCES) for x in (left, right)):
        _size(len(left) + len(right))
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        if abs(left) > 1 and right * math.log2(abs(left)) > MAX_BITS:
            raise TooMuchWork(f"a number of more than {MAX_BITS:,} bits")
    elif operator == "%" and isinstance(left, str):
        _percent(left, right)


_SEQUENCES = (str, bytes, list, tuple)
_STR_METHODS: dict[str, Callable[..., int]] = {  # the size of what a str (or bytes) method builds
    "center": lambda s, width, *a: _width(width),
    "ljust": lambda s, width, *a: _width(width),
    "rjust": lambda s, width, *a: _width(width),
    "zfill": lambda s, width: _width(width),
    "expandtabs": lambda s, tabsize=8: len(s) + len(s) * _width(tabsize),
    "replace": lambda s, old, new, count=-1: _replaced(s, old, new, count),
    "translate": lambda s, table, *a: (
        len(s) * max([len(v) for v in getattr(table, "values", list)() if isinstance(v, (str, bytes))] + [1])
    ),
}


def _joined(sep, items: list) -> int:
    return len(sep) * len(items) + sum(len(x) for x in items if isinstance(x, (str, bytes)))


def _method_call(obj, args: tuple, kwargs: dict) -> tuple:
    """A call of a str (or bytes) method that builds text, its size checked first; `join`'s
    items are taken once (an iterator) and passed on as a list."""
    subject = getattr(obj, "__self__", None)
    if not isinstance(obj, types.BuiltinMethodType) or not isinstance(subject, (str, bytes)):
        return args
    if obj.__name__ == "join" and args:
        items = list(args[0])
        _size(_joined(subject, items))
        return (items,) + args[1:]
    if obj.__name__ in _STR_METHODS:
        _size(_STR_METHODS[obj.__name__](subject, *args, **kwargs))
    return args


def _sized_filter(f, size):
    """Filter `f`, refusing (before it runs) a result `size(value, *args)` says is too large."""
    passes = getattr(f, "jinja_pass_arg", None) is not None

    @functools.wraps(f)
    def bounded(*args, **kwargs):
        _size(size(*(args[1:] if passes else args), **kwargs))
        return f(*args, **kwargs)

    return bounded


def _sum_numbers(iterable, attribute=None, start=0) -> int:
    if isinstance(start, bool) or not isinstance(start, (int, float)):
        raise TooMuchWork("sum adds numbers (its start must be a number)")
    return 0


_SIZED_FILTERS = {
    "center": lambda s, width=80: len(str(s)) + _width(width),
    "indent": lambda s, width=4, *a, **k: (
        len(str(s)) + (str(s).count("\n") + 1) * (_width(width) if not isinstance(width, str) else len(width))
    ),
    "wordwrap": lambda s, width=79, brk=True, wrapstring=None, *a, **k: (
        len(str(s)) * (1 + len(wrapstring or "\n"))
    ),
    "slice": lambda value, slices, *a: _width(slices),
    "batch": lambda value, linecount, *a: _width(linecount),
    "format": lambda value, *args, **kwargs: _percent_size(str(value), kwargs or args),
    "replace": lambda s, old, new, count=None: _replaced(str(s), str(old), str(new), count),
    "sum": _sum_numbers,
}


def _join_filter(f):
    @functools.wraps(f)
    def join(eval_ctx, value, d="", attribute=None):
        items = list(value)
        _size(_joined(str(d), items))
        return f(eval_ctx, items, d, attribute)

    return join


def _turns(context, iterable):
    """What a `for` loop walks, one step per turn (the loops of every template go through
    it: `_bounded_tree`)."""
    for item in iterable:
        _spend(1)
        yield item


def _concat(context, pieces) -> str:
    """`a ~ b`, its size checked before it is joined."""
    texts = [str(p) for p in pieces]
    _size(sum(len(t) for t in texts))
    return "".join(texts)


def _output(pieces) -> str:
    """A render's (or a block's, a macro's) output, refused once it passes MAX_SIZE."""
    out, total = [], 0
    for piece in pieces:
        total += len(piece)
        if total > MAX_SIZE:
            _size(total)
        out.append(piece)
    return "".join(out)


def _range(*args) -> range:
    numbers = range(*args)
    _spend(len(numbers))
    return numbers


def _lipsum(n=5, html=True, min=20, max=100):  # Jinja's own names
    _size(_width(n) * (abs(_width(min)) + abs(_width(max))) * 12)  # words of 12 characters at most
    return jinja2.utils.generate_lorem_ipsum(n, html, min, max)


def _bounded_tree(tree, environment):
    """Every `for` loop walks through `_turns`, every `~` joins through `_concat`."""
    for loop in list(tree.find_all(nodes.For)):
        loop.iter = nodes.Filter(loop.iter, "lethe_turns", [], [], None, None, lineno=loop.lineno)
    for concat in list(tree.find_all(nodes.Concat)):
        joined = nodes.List(concat.nodes, lineno=concat.lineno)
        concat.nodes = [nodes.Filter(joined, "lethe_concat", [], [], None, None, lineno=concat.lineno)]
    tree.set_environment(environment)
    return tree


@lru_cache(maxsize=1)
def bounded_environment() -> type:
    """The sandbox, with each render's work bounded (a class made once, when Jinja is
    first needed)."""

    class BoundedTemplate(jinja2.Template):
        def render(self, *args, **kwargs):
            if _WORK.get() is not None:  # a render inside a render: one budget for both
                return super().render(*args, **kwargs)
            token = _WORK.set(_Work())
            try:
                return super().render(*args, **kwargs)
            finally:
                _WORK.reset(token)

    class BoundedEnvironment(sandbox.ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(("*", "**", "%", "+"))
        template_class = BoundedTemplate
        concat = staticmethod(_output)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.globals.update(range=_range, lipsum=_lipsum)
            for name, size in _SIZED_FILTERS.items():
                self.filters[name] = _sized_filter(self.filters[name], size)
            self.filters["join"] = _join_filter(self.filters["join"])
            for name, f in list(self.filters.items()):
                self.filters[name] = _counting_filter(f)
            self.filters["lethe_turns"] = jinja2.pass_context(_turns)
            self.filters["lethe_concat"] = jinja2.pass_context(_concat)

        def _parse(self, source, name, filename):
            return _bounded_tree(super()._parse(source, name, filename), self)

        def call_binop(self, context, operator, left, right):
            _binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context, __obj, *args, **kwargs):  # Jinja's signature
            _spend(1)
            args = _method_call(__obj, args, kwargs)
            return _counted(super().call(__context, __obj, *args, **kwargs))

        def getitem(self, obj, argument):
            found = super().getitem(obj, argument)
            return _counted(found) if isinstance(argument, slice) else found

        def wrap_str_format(self, value):
            wrapped = super().wrap_str_format(value)
            if wrapped is not None:
                _format(value.__self__)
            return wrapped

    return BoundedEnvironment
