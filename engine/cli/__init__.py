"""`lethe`: the command line. Commands parse options, call one engine function, print.

Exit codes: 0 ok, 1 a policy, validation or expectation failure, 2 usage or internal error.
Engine errors become messages in one place (`LetheGroup.invoke`, in `base`), not in each
command.

The command modules define plain click commands and import only `base` and the engine;
this module builds the group and adds them, so nothing imports back into it.

    base       LetheGroup, shared options, open_memory, emit
    policy     validate, compile, render          (policy files, no database)
    data       run, ls, why, add, remember, pending, costs
    agent      recall (--explain), daemon, chat
    scenarios  experiment
    mcp        mcp (an MCP server: engine.integrations.mcp)
    importing  import                          (one store into another)
"""
from __future__ import annotations

import click

from . import agent, data, importing, mcp, policy, scenarios
from .base import CONTEXT, LetheGroup


@click.group(cls=LetheGroup, context_settings=CONTEXT)
@click.version_option(package_name="lethe")
def main():
    """Lethe: agent memory with a lifecycle. Memories decay, get superseded, expire and
    merge as a YAML policy says; every change is an event you can audit.

    Start with `lethe validate policies/*.yaml`, then `lethe add`, `lethe run`, `lethe ls`
    and `lethe why ID` against a database file (--db or LETHE_DB)."""


for command in (policy.validate, policy.compile_, policy.render,
                data.run, data.ls, data.why, data.add, data.remember, data.pending, data.costs,
                agent.recall, agent.daemon, agent.chat,
                scenarios.experiment, mcp.mcp, importing.import_):
    main.add_command(command)
