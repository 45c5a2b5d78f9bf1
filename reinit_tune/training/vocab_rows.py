"""Optimize only the word-embedding rows the training data can reach (an exact speed-up).

With AdamW and no weight decay (run_glue's setting, 003 §2), a row of the word-embedding
matrix whose token never occurs in the training subset gets a zero gradient at every step,
so its moments stay zero and every update leaves it bit-identical: p - lr * 0 / (0 + eps) = p.
Dense AdamW still reads and writes all ~30k rows, and gradient clipping takes their norm, on
every step, although a 500-example SST-2 subset reaches ~2,000 of them. ``VocabRows`` hands the
optimizer a parameter holding just the reachable rows, copies their gradient in before
clipping and the updated rows back into the model after the step. The optimizer, clipping
and schedule compute what they computed before on every entry that can change; only the
order in which the gradient norm sums its (same) non-zero squares differs, i.e. float
rounding (``tests/test_batching.py`` compares the weights with dense AdamW).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

# Above this share of the vocabulary the copies cost more than the skipped rows save.
MAX_SHARE = 0.5


class VocabRows:
    """The reachable rows of ``weight`` as their own parameter, kept in sync with it."""

    def __init__(self, weight: nn.Parameter, rows: torch.Tensor):
        self.weight = weight
        self.rows = rows.to(weight.device)
        self.param = nn.Parameter(weight.detach().index_select(0, self.rows))

    @classmethod
    def for_model(
        cls, model: nn.Module, input_ids: list[list[int]], groups: list[dict]
    ) -> VocabRows | None:
        """The rows of ``model``'s input embeddings used by ``input_ids``, or None where the
        shortcut is not exact (weight decay, embeddings tied to an output layer, frozen
        embeddings) or would not pay (most of the vocabulary is used)."""
        embeddings = model.get_input_embeddings()
        weight = getattr(embeddings, "weight", None)
        if weight is None or not weight.requires_grad:
            return None
        output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        if output is not None and getattr(output, "weight", None) is weight:
            return None  # tied: the output layer gives every row a gradient
        holding = [g for g in groups if any(p is weight for p in g["params"])]
        if len(holding) != 1 or holding[0].get("weight_decay", 0.0) != 0.0:
            return None  # decay moves rows without gradient
        used = np.unique(np.fromiter((t for ids in input_ids for t in ids), dtype=np.int64))
        if len(used) > MAX_SHARE * weight.shape[0]:
            return None
        return cls(weight, torch.from_numpy(used))

    def swap_into(self, groups: list[dict]) -> list[dict]:
        """``groups`` with the embedding matrix replaced by the rows parameter."""
        return [
            {**g, "params": [self.param if p is self.weight else p for p in g["params"]]}
            for g in groups
        ]

    def gather_grad(self) -> None:
        """Move the reachable rows of the embedding gradient to the rows parameter."""
        grad = self.weight.grad
        self.param.grad = None if grad is None else grad.index_select(0, self.rows)
        self.weight.grad = None

    @torch.no_grad()
    def scatter(self) -> None:
        """Write the updated rows back into the model's embedding matrix."""
        self.weight.index_copy_(0, self.rows, self.param)
