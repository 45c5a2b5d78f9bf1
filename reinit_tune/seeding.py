"""Derived seeds: one integer per (trial seed, purpose), stable across processes and machines.

Each source of randomness in a trial (train subset, each reinitialized layer, the classifier
head, dropout and batch order) gets its own stream, so changing one part of a config does not
shift the random numbers another part sees.
"""

from __future__ import annotations

import hashlib


def derive_seed(seed: int, *purpose: object) -> int:
    """A 63-bit seed from ``seed`` and a purpose tag (``repr`` based, so no hash salting)."""
    digest = hashlib.sha256(repr((int(seed), *purpose)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)
