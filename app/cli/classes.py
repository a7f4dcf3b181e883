"""The Click group classes of the ``dexlite`` command: help that reflows, default subcommands.

Typer keeps the single line breaks of a help text's later paragraphs, so a docstring wrapped
at 100 columns prints ragged lines in an 80-column terminal. :class:`ReflowingGroup` joins
each paragraph into one line, for itself and the commands it holds, and the terminal wraps it.

``dexlite channels`` and ``dexlite attributes`` were single commands before they gained
subcommands (``publish``, ``set``). Their old form must keep working, so each is a
:class:`DefaultCommandGroup`: an argument that names none of its commands is the default one's.
"""

from __future__ import annotations

from typing import Any, ClassVar

from typer.core import TyperGroup

__all__ = ["DefaultCommandGroup", "ReflowingGroup", "defaulting_to", "reflowed"]

#: What starts a paragraph Click prints as it is written.
VERBATIM = "\b"


def reflowed(text: str | None) -> str | None:
    """Return ``text`` with each paragraph on one line (a ``\\b`` paragraph kept as it is)."""
    if text is None:
        return None
    paragraphs = text.split("\n\n")
    return "\n\n".join(
        p if p.lstrip().startswith(VERBATIM) else " ".join(p.split()) for p in paragraphs
    )


class ReflowingGroup(TyperGroup):
    """A Typer group whose help, and that of the commands it holds, is reflowed."""

    def __init__(self, **attrs: Any) -> None:
        """Build the group, then reflow its help and its commands' (built before it)."""
        super().__init__(**attrs)
        for command in (self, *self.commands.values()):
            command.help = reflowed(command.help)


class DefaultCommandGroup(ReflowingGroup):
    """A group that runs :attr:`default_command` when no subcommand is named.

    ``group ID --json`` is read as ``group <default_command> ID --json``. A Flow ID spelled like
    a subcommand (``list``) needs the explicit form: ``group list list``.
    """

    #: The subcommand that runs when the first argument names none.
    default_command: ClassVar[str] = ""

    # ``ctx`` is Any: its class is click's Context in older Typers and Typer's vendored copy
    # of it in newer ones, and the project's Typer range spans both.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Put the default subcommand in front of arguments that name no subcommand."""
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


def defaulting_to(command: str) -> type[DefaultCommandGroup]:
    """Return a :class:`DefaultCommandGroup` class whose default subcommand is ``command``."""
    return type(
        f"DefaultsTo{command.title()}Group", (DefaultCommandGroup,), {"default_command": command}
    )
