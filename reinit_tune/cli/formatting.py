"""What every ``reinit-tune`` subcommand's parser shares: the help formatter that shows a
default only where there is one to show, help-text escaping, and argument types."""

from __future__ import annotations

import argparse


class Help(argparse.RawDescriptionHelpFormatter):
    """Help that shows a default only where there is one to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.default not in (None, argparse.SUPPRESS, False, [], ())
                and "default" not in text and action.option_strings):
            default = action.default
            if isinstance(default, list):
                default = " ".join("full" if v is None else str(v) for v in default)
            text += f" (default: {default})"
        return text


def escape(text: str) -> str:
    """Help strings go through %-formatting (argparse): keep a literal % (100%) as it is."""
    return text.replace("%", "%%")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value
