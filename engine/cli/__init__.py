"""`lethe`: the command line. Commands parse options, call one engine function, print.

Exit codes: 0 ok, 1 a policy, validation or expectation failure, 2 usage or internal error.
Engine errors become messages in one place (`LetheGroup.invoke`, in `base`), not in each
command.

The command modules define plain click commands and import only `base` and the engine;
this module builds the group from the table below, so nothing imports back into it. A
command's module is imported when the command runs (or `--help` lists it): `lethe run` does
not pay for the MCP server, the experiment runner or the chat loop.

    base       LetheGroup, shared options, open_memory, emit
    policy     validate, compile, render          (policy files, no database)
    data       run, ls, why, add, remember, pending, costs
    agent      recall (--explain), daemon, chat
    scenarios  experiment
    mcp        mcp (an MCP server: engine.integrations.mcp)
    importing  import                          (one store into another)
    ui         ui (the inspector, a web app: engine.apps.inspector)
"""

from __future__ import annotations

import click

from engine.base import distribution
from engine.base.lazy import lazy
from engine.cli.base import CONTEXT, LetheGroup

policy = lazy("engine.cli.policy")
data = lazy("engine.cli.data")
agent = lazy("engine.cli.agent")
scenarios = lazy("engine.cli.scenarios")
mcp = lazy("engine.cli.mcp_command")
importing = lazy("engine.cli.importing")
ui = lazy("engine.cli.ui")

# name -> (module, attribute); `lethe --help` lists them sorted
COMMANDS = {
    "validate": (policy, "validate"),
    "compile": (policy, "compile_"),
    "render": (policy, "render"),
    "run": (data, "run"),
    "ls": (data, "ls"),
    "why": (data, "why"),
    "add": (data, "add"),
    "remember": (data, "remember"),
    "pending": (data, "pending"),
    "costs": (data, "costs"),
    "recall": (agent, "recall"),
    "daemon": (agent, "daemon"),
    "chat": (agent, "chat"),
    "experiment": (scenarios, "experiment"),
    "mcp": (mcp, "mcp"),
    "import": (importing, "import_"),
    "ui": (ui, "ui"),
}


class Lethe(LetheGroup):
    """The `lethe` group: commands from COMMANDS, each imported on first use."""

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in self.commands and name in COMMANDS:
            module, attr = COMMANDS[name]
            self.add_command(getattr(module, attr), name)
        return self.commands.get(name)


@click.group(cls=Lethe, context_settings=CONTEXT)
@click.version_option(distribution.VERSION, prog_name="lethe")
def main():
    """Lethe: agent memory with a lifecycle. Memories decay, get superseded, expire and
    merge as a YAML policy says; every change is an event you can audit.

    Start with `lethe validate lifecycle` (a shipped policy, found from any directory; give
    a file to check your own), then `lethe add`, `lethe run`, `lethe ls` and `lethe why ID`
    against a database file (--db or LETHE_DB)."""


def every_command() -> dict[str, click.Command]:
    """All of `lethe`'s commands, imported (for documentation and tests)."""
    return {name: main.get_command(None, name) for name in main.list_commands(None)}
