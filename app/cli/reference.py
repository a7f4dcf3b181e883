"""The ``dexlite`` command as a Click command, for the documentation's command line reference.

The command line is a Typer app (:data:`app.cli.dexlite`); mkdocs-click documents Click
commands, so this module converts it once, at import, with every command registered by then.
The documentation names it in its ``::: mkdocs-click`` directive (``docs/reference/cli.md``)::

    ::: mkdocs-click
        :module: app.cli.reference
        :command: command
        :prog_name: dexlite
        :style: plain

Typer builds its commands on its own copy of Click, so mkdocs-click's ``table`` style, which
looks for Click's own option class, finds no options: the ``plain`` style prints each command's
options as its ``--help`` does. Nothing else imports this module, so the conversion costs the
command line nothing.
"""

from __future__ import annotations

from typer.main import get_command

from app.cli import dexlite

__all__ = ["command"]

#: The whole ``dexlite`` command tree (``serve``, ``openapi``, ``flows ...``, ...) as a
#: Click-compatible command.
command = get_command(dexlite)
