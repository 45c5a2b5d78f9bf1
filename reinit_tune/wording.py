"""How the product's messages write a count of something: "1 trial", "2 trials"."""

from __future__ import annotations


def counted(n: float, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is exactly 1 ("0 trials", "0.5 GPUs"); a whole
    count is written in full ("1000000 trials", where ``:g`` would write "1e+06")."""
    shown = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{shown} {noun}{'' if n == 1 else 's'}"
