"""Mapping a paper's layer numbers and blocks onto the store's model (claims.md §0.2).

A paper's layer ℓ on its L_p-layer model becomes map(ℓ) = max(1, round_half_up(ℓ·L/L_p)) on
an L-layer model, so "the first three layers" of BERT-base are the first 2 of a 6-layer
MiniLM (1.5 rounded up, flagged) and the first 6 of a 24-layer model. Blocks are 4
contiguous near-equal parts of 1..L (``numpy.array_split``): 003's 3-layer blocks on
BERT-base.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

BLOCKS = 4


@dataclass(frozen=True)
class Mapping:
    """A paper layer count ``paper`` of ``paper_layers`` as ``layers`` of ``num_layers``."""

    paper: int
    paper_layers: int
    num_layers: int

    @property
    def exact(self) -> float:
        return self.paper * self.num_layers / self.paper_layers

    @property
    def layers(self) -> int:
        return max(1, math.floor(self.exact + 0.5))

    @property
    def rounded(self) -> bool:
        return self.exact != self.layers

    def __str__(self) -> str:
        note = f" ({self.exact:g} rounded half up)" if self.rounded else ""
        return (f"first {self.paper} of {self.paper_layers} -> first {self.layers} of "
                f"{self.num_layers}{note}")


@functools.cache
def map_layer(paper: int, num_layers: int, paper_layers: int = 12) -> Mapping:
    return Mapping(paper, paper_layers, num_layers)


@functools.cache
def blocks(num_layers: int) -> tuple[tuple[int, ...], ...]:
    """The 4 blocks of 0-based layer indices, first to last: 1-3, 4-6, 7-9, 10-12 of 12
    layers; 1-2, 3-4, 5, 6 of 6 (the localized family trains them besides its 3-layer
    blocks: ``reinit_tune.families.localized``)."""
    return tuple(tuple(int(i) for i in part)
                 for part in np.array_split(np.arange(num_layers), BLOCKS) if len(part))


def block_name(block: tuple[int, ...]) -> str:
    """1-based, as the papers write them: '1-3'."""
    return f"{block[0] + 1}-{block[-1] + 1}" if len(block) > 1 else f"{block[0] + 1}"
