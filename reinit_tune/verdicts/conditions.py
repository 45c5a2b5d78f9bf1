"""The cells a claim compares, as conditions on a run's surgery.

A condition matches runs by what was done to the model, not by the family that ran it, so
a run stored under two family names (progressive k = L is the localized experiment's full
model, a single-layer reinit of the last layer is progressive k = L − 1; claims.md §0.6) is
one run of one cell. Every condition is resolved against the model's depth L
(``reinit_tune.verdicts.depth``) and says, for a missing cell, which family runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from reinit_tune.verdicts.depth import block_name, blocks, map_layer

# the column ``surgery_columns`` adds: a run's surgery as one hashable key
KEY = "_surgery"


def surgery_key(reinit: frozenset[int], order: tuple[int, ...] | None = None,
                multiplier: float = 1.0, layernorm: bool = False) -> tuple:
    """What was done to a run's model, as one hashable value: the reinitialized layers, the
    layer order (None: the original one), the LR multiplier and LayerNorm kept. Runs with
    any other surgery (heads, a probe, an intermediate task) get no key."""
    return (reinit, order, float(multiplier), bool(layernorm))


def probe_key(layer: int) -> tuple:
    """A probe of hidden state ``layer`` (0: the embeddings) of the frozen encoder."""
    return ("probe", int(layer))


def head_key(layer: int, head: int) -> tuple:
    """One attention head (0-based layer and head) reinitialized, nothing else."""
    return ("head", int(layer), int(head))


def after_key(task: str) -> tuple:
    """Finetuned on ``task`` first, then on the run's own task, nothing else (001 Exp 1)."""
    return ("after", str(task))


def _key(reinit, order, multiplier: float, layernorm, probe: float, heads,
         staged: str | None = None) -> tuple | None:
    if staged is not None:
        plain = (not reinit and order is None and multiplier == 1.0 and not layernorm
                 and not heads and probe != probe)
        return after_key(staged) if plain else None
    if probe == probe:  # not NaN
        return None if heads or reinit else probe_key(int(probe))
    if heads:  # one head and nothing else: 001 Exp 3; other head surgery has no cell
        plain = (not reinit and order is None and multiplier == 1.0 and not layernorm
                 and len(heads) == 1)
        return head_key(*heads[0]) if plain else None
    return surgery_key(frozenset(reinit or ()), order, multiplier, bool(layernorm))


def surgery_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the ``KEY`` column conditions look up (a probe's ``probe_key``, a
    single head's ``head_key``, an intermediate task's ``after_key``; None for surgery no
    condition names, such as several heads; the identity permutation is the original
    order)."""
    out = rows.copy()
    staged = [None if pd.isna(t) else str(t) for t in rows["intermediate_task"]]
    probes = rows["probe_layer"].to_numpy(dtype=float)
    orders = [None if o is None or tuple(o) == tuple(range(len(o))) else tuple(o)
              for o in rows["layer_order"]]
    heads = [[tuple(int(x) for x in h) for h in v]
             if v is not None and not isinstance(v, float) else [] for v in rows["reinit_heads"]]
    out[KEY] = [_key(r, o, m, n, p, h, s)
                for r, o, m, n, p, h, s in zip(rows["reinit_layers"], orders,
                                               rows["reinit_lr_multiplier"].astype(float),
                                               rows["preserve_layernorm"], probes, heads,
                                               staged, strict=True)]
    return out


@dataclass(frozen=True)
class Kept:
    """Progressive reinitialization keeping layers 1..k pretrained (003 §2): ``k`` is "E"
    (k = 0, the embeddings-only model), "F" (k = L, the full model), "q" (the paper's first
    three of 12, mapped onto the model), or k itself. ``multiplier`` and ``layernorm`` pick
    003 App. E/F's variants."""

    k: str | int
    multiplier: float = 1.0
    layernorm: bool = False
    min_runs: ClassVar[int] = 0

    @property
    def family(self) -> str:
        return "variants" if self.multiplier != 1 or self.layernorm else "progressive"

    def layers(self, num_layers: int) -> int:
        if self.k == "E":
            return 0
        if self.k == "F":
            return num_layers
        return map_layer(3, num_layers).layers if self.k == "q" else int(self.k)

    def key(self, num_layers: int) -> tuple:
        k = self.layers(num_layers)
        return surgery_key(frozenset(range(k, num_layers)), None, self.multiplier,
                           self.layernorm)

    def describe(self, num_layers: int) -> str:
        variant = (f" with LR x{self.multiplier:g}" if self.multiplier != 1 else "") + (
            " with LayerNorm kept" if self.layernorm else "")
        return f"{self.family} k={self.layers(num_layers)}{variant}"


@dataclass(frozen=True)
class Block:
    """003 §4's localized blocks: block ``index`` (0 = first of 4) reinitialized
    (``kept=False``, R_b) or the only block kept (``kept=True``, P_b)."""

    index: int
    kept: bool

    family: ClassVar[str] = "localized"
    min_runs: ClassVar[int] = 0

    def layers(self, num_layers: int) -> frozenset[int]:
        block = frozenset(blocks(num_layers)[self.index])
        return frozenset(range(num_layers)) - block if self.kept else block

    def key(self, num_layers: int) -> tuple:
        return surgery_key(self.layers(num_layers))

    def describe(self, num_layers: int) -> str:
        name = block_name(blocks(num_layers)[self.index])
        return f"localized {'only block' if self.kept else 'block'} {name} " + (
            "kept" if self.kept else "reinitialized")


@dataclass(frozen=True)
class Layer:
    """One layer reinitialized (003 App. C): ``layer`` 1-based on the store's model."""

    layer: int

    family: ClassVar[str] = "single_layer"
    min_runs: ClassVar[int] = 0

    def key(self, num_layers: int) -> tuple:
        return surgery_key(frozenset({self.layer - 1}))

    def describe(self, num_layers: int) -> str:
        return f"single layer {self.layer} reinitialized"


@dataclass(frozen=True)
class Permuted:
    """The pretrained layers in a shuffled order (003 §5); its units are the permutations
    (the runs of one order are averaged first), not the seeds."""

    family: ClassVar[str] = "permutations"
    # claims.md 003-C13/C14: at least 5 non-identity permutations
    min_runs: ClassVar[int] = 5

    @staticmethod
    def matches(key: tuple) -> bool:
        """Whether a run's surgery key is a shuffled order and nothing else."""
        if len(key) != 4:  # a probe
            return False
        reinit, order, multiplier, layernorm = key
        return order is not None and not reinit and multiplier == 1.0 and not layernorm

    def describe(self, num_layers: int) -> str:
        return "permutations (shuffled orders)"


@dataclass(frozen=True)
class Probe:
    """A linear probe of hidden state ``layer`` of the frozen pretrained encoder (003 §3,
    App. D; 0 = the embeddings, ``layer`` = the output of layer ``layer``)."""

    layer: int

    family: ClassVar[str] = "probing"
    min_runs: ClassVar[int] = 0

    def key(self, num_layers: int) -> tuple:
        return probe_key(self.layer)

    def describe(self, num_layers: int) -> str:
        return f"probing k={self.layer}"


@dataclass(frozen=True)
class Heads:
    """001 Exp 3's per-layer effect of reinitializing one attention head: per seed, the mean
    over the heads of ``layers`` of the score with that head alone reinitialized (001
    §6.3: "average over the 12 heads within a seed, then across seeds"). ``layers`` are
    1-based as 001 writes them; 0 and below count from the top (0: layer L, -1: L−1)."""

    layers: tuple[int, ...]

    family: ClassVar[str] = "heads"
    min_runs: ClassVar[int] = 0

    def indices(self, num_layers: int) -> set[int]:
        """The 0-based layers."""
        return {layer - 1 if layer > 0 else num_layers - 1 + layer for layer in self.layers}

    def describe(self, num_layers: int) -> str:
        shown = ", ".join(str(i + 1) for i in sorted(self.indices(num_layers)))
        return f"heads of layer{'s' * (len(self.layers) > 1)} {shown}, one at a time"


@dataclass(frozen=True)
class After:
    """Finetuned on ``task`` first (3 epochs), then on the group's task (001 Exp 1)."""

    task: str

    family: ClassVar[str] = "sequential"
    min_runs: ClassVar[int] = 0

    def key(self, num_layers: int) -> tuple:
        return after_key(self.task)

    def describe(self, num_layers: int) -> str:
        return f"sequential after {self.task}"


Condition = Kept | Block | Layer | Permuted | Probe | Heads | After
