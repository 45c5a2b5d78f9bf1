"""What every ``reinit-tune`` subcommand's parser shares: a strict parser (no abbreviated
flags; an error is one line naming the flag, not the whole usage), the help formatter that
shows a default only where there is one to show, help-text escaping, and argument types."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from reinit_tune.errors import InputError, flag_type
from reinit_tune.tasks import task_name


class Parser(argparse.ArgumentParser):
    """``argparse`` without abbreviations (``--seed 3`` is not ``--seeds 3``), whose errors
    are one line (the sweep's usage alone runs to 30 lines) pointing at ``--help``.
    Subcommands' parsers are of this class too."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # argparse reads "-1e-5" as a flag ("--lr: expected one argument"); a number in any
        # notation is a value, so the flag's own check can say what is wrong with it
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$", re.I)

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)

    def parse_args(self, args=None, namespace=None):  # noqa: D102 - argparse's, stricter
        given = sys.argv[1:] if args is None else list(args)
        if given and given[0].startswith("--") and any(
                isinstance(a, argparse._SubParsersAction) for a in self._actions) and \
                given[0].split("=", 1)[0] not in self._option_string_actions:
            # a misspelled option before the command ("--verison") would otherwise be
            # "the following arguments are required: COMMAND"
            flags = [s for s in self._option_string_actions if s.startswith("--")]
            near = difflib.get_close_matches(given[0], flags, n=2, cutoff=0.6)
            hint = f"; did you mean {' or '.join(near)}?" if near else ""
            self.error(f"unrecognized argument {given[0]}{hint}")
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            chosen = self.chosen(parsed)
            flags = sorted({s for a in chosen._actions for s in a.option_strings
                            if s.startswith("--")})
            unknown = next((x.split("=", 1)[0] for x in extra if x.startswith("-")), extra[0])
            near = difflib.get_close_matches(unknown, flags, n=3, cutoff=0.75)
            hint = f"; did you mean {' or '.join(near)}?" if near else ""
            chosen.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
        return parsed

    def chosen(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The (sub)parser the parsed command line ended in: its flags are the ones a
        mistyped flag was meant to be."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                name = getattr(parsed, action.dest, None)
                if name in action.choices:
                    sub = action.choices[name]
                    return sub.chosen(parsed) if isinstance(sub, Parser) else sub
        return self


def _nearest_folder(path: Path) -> Path:
    """``path`` itself or its nearest existing ancestor."""
    path = path.expanduser().absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def _try_writing(flag: str, path: str | Path, folder: Path) -> None:
    """An ``InputError`` where a file cannot be made in ``folder`` (permissions say it can
    where the file system does not: /proc, a read-only mount): a temporary one is made and
    removed."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise InputError(f"{flag} {path}: cannot write in {folder} ({e.strerror}); give a "
                         "path you can write") from None


def output_file(flag: str, path: str) -> Path:
    """``path`` as a file a command will write (``flag`` names it in the error): an
    ``InputError`` now, before any work, where it is empty or a folder, or its folder does
    not exist or cannot be written."""
    if not str(path):
        raise InputError(f"{flag}: an empty file name; give a file, e.g. verdicts.json")
    target = Path(path).expanduser()
    if target.is_dir():
        raise InputError(f"{flag} {path}: is a folder; give a file name, e.g. "
                         f"{target / 'verdicts.json'}")
    folder = target.absolute().parent
    if not folder.is_dir():
        raise InputError(f"{flag} {path}: the folder {folder} does not exist; create it or "
                         "give a path in an existing folder")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise InputError(f"{flag} {path}: cannot write there (no permission); give a path "
                         "you can write")
    _try_writing(flag, path, folder)
    return target


def output_folder(flag: str, path: str | Path) -> Path:
    """``path`` as a folder a command will create or fill: an ``InputError`` now where it
    is a file, or where the folder (or the nearest one it would be made in) cannot be
    written."""
    if not str(path):
        raise InputError(f"{flag}: an empty path; give a folder (it is created if missing)")
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise InputError(f"{flag} {path}: is a file, not a folder; give a folder (it is "
                         "created if missing)")
    nearest = _nearest_folder(target)
    if not nearest.is_dir():
        raise InputError(f"{flag} {path}: {nearest} is a file, not a folder; give another "
                         "path")
    if not os.access(nearest, os.W_OK):
        raise InputError(f"{flag} {path}: cannot write in {nearest} (no permission); give a "
                         "folder you can write")
    _try_writing(flag, path, nearest)
    return target


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
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


#: A GLUE/SQuAD task name as a flag's type (``reinit_tune.tasks.task_name``).
task_arg = flag_type(task_name)


def results_folder(text: str) -> str:
    """``--results``: a folder, not empty (``Path("")`` is the current folder, silently) and
    not a table folder inside a store (``STORE/trials`` would start a store nested in it)."""
    from pathlib import Path

    from reinit_tune.store.tables import TABLES

    if not text.strip():
        raise argparse.ArgumentTypeError("give a folder (an empty path would mean the "
                                         "current folder; write . for that)")
    path = Path(text).expanduser()
    if path.name in TABLES and (path.parent / "trials").is_dir():
        raise argparse.ArgumentTypeError(
            f"{text} is the {path.name} table of the store {path.parent}; pass --results "
            f"{path.parent}")
    return text
