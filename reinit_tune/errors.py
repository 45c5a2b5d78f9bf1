"""The errors reinit-tune raises on purpose, in one hierarchy.

Callers decide by class, never by message: the command line turns an ``InputError`` found
before a sweep starts into exit status 2 with the message alone (it names what to change), the
report turns a ``NoResultsError`` into "not drawn: <why>", and everything else is a bug or an
infrastructure failure that keeps its traceback.

- ``ReinitTuneError``: the base.
- ``InputError``: something the user gave (a flag, a model, a data file, a config field) is
  wrong; the message says which and what to change. Also a ``ValueError``, since most of these
  are bad values.
- ``DataNotFoundError``: a dataset split is neither in the local data folder nor reachable.
- ``NoResultsError``: a results store holds no rows a figure or table can use.
- ``TrialDiverged``: a trial's loss or dev score stopped being a finite number; the trial is
  stored as an error whose message starts with "diverged:", never as a result.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


class ReinitTuneError(Exception):
    """Base of every error reinit-tune raises deliberately."""


class InputError(ReinitTuneError, ValueError):
    """Bad input: the message names the flag, field, file or value to change."""


class DataNotFoundError(InputError, FileNotFoundError):
    """A dataset split is missing locally and could not be loaded from the hub."""


class NoResultsError(ReinitTuneError, LookupError):
    """The results store has no rows for a figure or table (run the sweep that fills it)."""


class ClusterError(ReinitTuneError, RuntimeError):
    """Ray could not be started or joined (a node that timed out starting on a loaded
    machine): the message says what to try; nothing was trained."""


class TrialDiverged(ReinitTuneError, ArithmeticError):
    """A trial's training loss, dev loss or dev score is not finite (NaN or infinite)."""


def flag_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse type: its ``InputError`` becomes argparse's own error (which
    names the flag), never "invalid parse value"."""
    def checked(text: str) -> Any:
        try:
            return parse(text)
        except InputError as e:
            message = str(e)
            if message.startswith("--"):  # argparse names the flag already
                message = message.split(": ", 1)[-1]
            raise argparse.ArgumentTypeError(message) from None
    checked.__name__ = parse.__name__
    return checked
