"""What every store backend does the same way, whatever its database: the clock, the
context manager, and the check that a read-only open found a current schema. Each
backend names its own migrations list (`migrations`) and says which it has (`_applied`).
"""
from __future__ import annotations

from ..clock import iso
from ..errors import StoreError


class StoreCommon:
    migrations: list = []

    def now(self) -> str:
        return iso(self.clock())

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_current(self) -> None:
        """A store opened read-only is never upgraded: an older schema is refused."""
        missing = [fn.__name__ for fn in self.migrations if fn.__name__ not in self._applied()]
        if missing:
            raise StoreError(f"{self.path} is from an older version of Lethe (it lacks "
                             f"{', '.join(missing)}); run a command that writes, such as "
                             "`lethe run`, once to upgrade it")
