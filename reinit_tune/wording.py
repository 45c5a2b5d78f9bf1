"""How the product's messages write a count of something: "1 trial", "2 trials"."""

from __future__ import annotations


def counted(n: float, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is exactly 1 ("0 trials", "0.5 GPUs")."""
    return f"{n:g} {noun}{'s' * (n != 1)}"
