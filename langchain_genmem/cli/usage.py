"""Usage errors of ``genmem`` as one ``error: ...`` line, from click's own exceptions.

A misspelled option or command gets the close matches click found ("did you mean ...?"), a
global option given after the command says where it goes, a value out of range names the
option. Nothing here parses the command line: click has, and raised what it found.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import typer

from langchain_genmem.core.errors import error_line

# The click typer runs on: the click package, or the copy newer typers ship (typer._click).
_CLICK_ERRORS = sys.modules[typer.BadParameter.__module__]
UsageError: type[Exception] = _CLICK_ERRORS.UsageError
"""What click raises for a command line it cannot read."""
_NO_SUCH_OPTION = _CLICK_ERRORS.NoSuchOption
_MISSING = _CLICK_ERRORS.MissingParameter
# click's "no arguments: show the help" (8.2+): not an error to reword.
_HELP_ERRORS: tuple[type[BaseException], ...] = tuple(
    t for t in (getattr(_CLICK_ERRORS, "NoArgsIsHelpError", None),) if t is not None
)


def is_help(error: Any) -> bool:
    """Whether the error is click's way of showing the help of a command given no arguments.

    Args:
        error: the usage error.

    Returns:
        True for that case, which is printed as click prints it.
    """
    return isinstance(error, _HELP_ERRORS)


def usage_line(error: Any) -> str:
    """A usage error in one line, starting ``error: ``.

    Args:
        error: what click raised while reading the command line.

    Returns:
        The line, without its newline.
    """
    ctx = error.ctx
    command = ctx.command_path if ctx is not None else "genmem"
    if isinstance(error, _NO_SUCH_OPTION):
        text = _no_such_option(error.option_name, error.possibilities, ctx, command)
    elif isinstance(error, typer.BadParameter) and error.param is not None and not isinstance(
        error, _MISSING
    ):
        text = f"{_param_name(error.param)}: {error.message.rstrip('.')}"
    else:  # missing values, unknown commands, an option without its value
        message = error.format_message().rstrip(".").replace(". Did you mean", "; did you mean")
        text = f"{command}: {message[:1].lower()}{message[1:]}"
    return error_line(text)


def _no_such_option(
    option: str, possibilities: Sequence[str] | None, ctx: Any, command: str
) -> str:
    """No such option: a global option after the command, or close matches, or where to look."""
    root = ctx.find_root() if ctx is not None else None
    if root is not None and ctx is not root:
        for param in root.command.params:
            if param.param_type_name == "option" and option in param.opts:
                value = "" if param.is_flag else f" {(param.name or 'value').upper()}"
                rest = command.removeprefix(root.command_path).strip()
                return (f"{option} is a global option: put it before the command: "
                        f"{root.info_name} {option}{value} {rest} ...")
    if possibilities:
        return f"no such option {option} for {command}{_did_you_mean_of(possibilities)}"
    return f"no such option {option} for {command}; `{command} --help` lists its options"


def _did_you_mean_of(possibilities: Sequence[str]) -> str:
    if not possibilities:
        return ""
    shown = [repr(p) for p in possibilities]
    if len(shown) == 1:
        return f"; did you mean {shown[0]}?"
    return f"; did you mean {', '.join(shown[:-1])} or {shown[-1]}?"


def _param_name(param: Any) -> str:
    """How the user wrote the parameter: its longest option, or an argument's name."""
    if param.param_type_name == "option":
        return max(param.opts, key=len)
    return str(param.metavar or param.name or "value").lower()
