"""Similarity measures between two models: pure functions on tensors.

- ``weight_distances``: Frobenius and spectral norm of the difference of matching weight
  matrices (000 §4.5 compares the linear projections of the output sub-layer by "euclidean
  distance"; the 003 authors' fork used the spectral norm of ``output.dense``; both are kept).
- ``attention_js_divergence``: 002 §3, the Jensen–Shannon divergence between the attention
  distributions of two models at every non-padding query token, averaged over the tokens of
  an example and over heads (natural log, so it lies in [0, ln 2]).
- ``svcca_distance``: 002 §4 / Raghu et al. 2017. Each representation (samples × features)
  is centred and reduced by SVD to the directions that explain 99% of its variance; CCA
  between the two reduced representations gives canonical correlations ρ_i, i = 1..c with
  c = min of the kept dimensions; the distance is 1 − mean ρ_i.
- ``linear_cka``: Kornblith et al. 2019, ‖YᵀX‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F) on centred X, Y.

SVCCA and CKA depend on the data only through the centred (cross-)covariances, so they are
computed from ``CrossMoments`` that accumulate batch by batch: a trial never holds all token
representations of the dev set in memory, and the result equals the whole-matrix formula.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

SVCCA_KEEP_VARIANCE = 0.99  # Raghu et al. 2017 keep the top directions explaining 99%


class InsufficientSamplesError(ValueError):
    """SVCCA asked of fewer samples than features: CCA would fit noise perfectly (all
    canonical correlations 1), so no distance is returned instead of a meaningless 0."""


# -- weights -------------------------------------------------------------------------------
@torch.no_grad()
def weight_distances(
    a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]
) -> dict[str, dict[str, float]]:
    """For every 2-D tensor present in both mappings: ``{"fro": ‖a−b‖_F, "spectral": ‖a−b‖₂}``
    (the spectral norm is the largest singular value of the difference)."""
    out = {}
    for name, wa in a.items():
        wb = b.get(name)
        if wb is None or wa.ndim != 2:
            continue
        if wa.shape != wb.shape:
            raise ValueError(f"{name}: shapes differ ({tuple(wa.shape)} vs {tuple(wb.shape)})")
        diff = wa.detach().to(torch.float64) - wb.detach().to(wa.device, torch.float64)
        out[name] = {
            "fro": float(torch.linalg.matrix_norm(diff, ord="fro")),
            "spectral": float(torch.linalg.matrix_norm(diff, ord=2)),
        }
    return out


# -- attention -----------------------------------------------------------------------------
def js_divergence(p: torch.Tensor, q: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Jensen–Shannon divergence (natural log) between distributions along ``dim``:
    ½ KL(P‖R) + ½ KL(Q‖R) with R = (P+Q)/2; zero-probability entries contribute 0."""
    p = p.to(torch.float64)
    q = q.to(torch.float64)
    r = 0.5 * (p + q)
    kl_pr = (torch.special.xlogy(p, p) - torch.special.xlogy(p, r)).sum(dim)
    kl_qr = (torch.special.xlogy(q, q) - torch.special.xlogy(q, r)).sum(dim)
    return (0.5 * kl_pr + 0.5 * kl_qr).clamp_min(0.0)  # rounding can dip just below 0


def attention_js_divergence(
    p: torch.Tensor, q: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """002 §3 per example: (1/H) Σ_h (1/W) Σ_i JS(A_p^h(word_i) ‖ A_q^h(word_i)).

    ``p``, ``q``: attention probabilities (batch, heads, query, key) of one layer of the two
    models; ``attention_mask``: (batch, tokens), 1 for the W real tokens of each example.
    Returns one value per example; the layer's value is their mean over the N examples.
    """
    if p.shape != q.shape or p.ndim != 4:
        raise ValueError(f"attention shapes must match as (batch, heads, query, key): "
                         f"{tuple(p.shape)} vs {tuple(q.shape)}")
    js = js_divergence(p, q)  # (batch, heads, query)
    mask = attention_mask.to(js.device, torch.float64)[:, None, :]
    per_head = (js * mask).sum(-1) / mask.sum(-1)
    return per_head.mean(-1)


# -- representations -----------------------------------------------------------------------
class CrossMoments:
    """Running sums for the centred covariances of two paired representations.

    Rows of ``x`` and ``y`` passed to ``update`` are paired samples (the same token seen by
    two models). Sums are float64 and shifted by the first batch's mean, which keeps the
    final centring free of cancellation when features have large means.
    """

    def __init__(self) -> None:
        self.n = 0
        self._shift: tuple[torch.Tensor, torch.Tensor] | None = None

    @torch.no_grad()
    def update(self, x: torch.Tensor, y: torch.Tensor) -> None:
        if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
            raise ValueError(f"need paired (samples, features) matrices, got "
                             f"{tuple(x.shape)} and {tuple(y.shape)}")
        x = x.detach().to(torch.float64)
        y = y.detach().to(x.device, torch.float64)
        if self._shift is None:
            self._shift = (x.mean(0), y.mean(0))
            dx, dy = x.shape[1], y.shape[1]
            opts = {"dtype": torch.float64, "device": x.device}
            self.sx, self.sy = torch.zeros(dx, **opts), torch.zeros(dy, **opts)
            self.sxx = torch.zeros(dx, dx, **opts)
            self.syy = torch.zeros(dy, dy, **opts)
            self.sxy = torch.zeros(dx, dy, **opts)
        x = x - self._shift[0]
        y = y - self._shift[1]
        self.n += x.shape[0]
        self.sx += x.sum(0)
        self.sy += y.sum(0)
        self.sxx += x.T @ x
        self.syy += y.T @ y
        self.sxy += x.T @ y

    def covariances(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Centred Σxx, Σyy, Σxy (divided by n − 1)."""
        if self.n < 2:
            raise InsufficientSamplesError(f"need at least 2 samples, got {self.n}")
        n = self.n
        mx, my = self.sx / n, self.sy / n
        cxx = (self.sxx - n * torch.outer(mx, mx)) / (n - 1)
        cyy = (self.syy - n * torch.outer(my, my)) / (n - 1)
        cxy = (self.sxy - n * torch.outer(mx, my)) / (n - 1)
        return cxx, cyy, cxy

    @property
    def features(self) -> tuple[int, int]:
        return (0, 0) if self._shift is None else (len(self._shift[0]), len(self._shift[1]))

    @classmethod
    def of(cls, x: torch.Tensor, y: torch.Tensor) -> CrossMoments:
        moments = cls()
        moments.update(x, y)
        return moments


@dataclass(frozen=True)
class SVCCAResult:
    distance: float
    correlations: torch.Tensor  # canonical correlations, descending
    dims: tuple[int, int]  # directions kept by the SVD step for each representation
    samples: int


def _top_directions(cov: torch.Tensor, keep: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvectors of ``cov`` for the fewest directions explaining ``keep`` of the variance
    (the right singular vectors of the centred data matrix; eigenvalues = σ²/(n−1))."""
    values, vectors = torch.linalg.eigh(cov)
    values = values.flip(0).clamp_min(0.0)
    vectors = vectors.flip(1)
    total = values.sum()
    if not total > 0:
        raise ValueError("representation has no variance; SVCCA is undefined")
    explained = torch.cumsum(values, 0) / total
    k = int(torch.searchsorted(explained, torch.tensor(keep, dtype=explained.dtype,
                                                       device=explained.device))) + 1
    k = min(k, len(values))
    return values[:k], vectors[:, :k]


def svcca_from_moments(moments: CrossMoments, keep: float = SVCCA_KEEP_VARIANCE) -> SVCCAResult:
    """SVCCA (Raghu et al. 2017) of the two representations summarised by ``moments``."""
    dx, dy = moments.features
    if moments.n <= max(dx, dy):
        raise InsufficientSamplesError(
            f"SVCCA needs more samples than features: {moments.n} samples for {dx} and {dy} "
            "features (centred data of n samples has rank < n, so CCA would report perfect "
            "correlation). Use more examples, e.g. a larger --similarity-examples."
        )
    if not 0 < keep <= 1:
        raise ValueError(f"keep: variance fraction must lie in (0, 1], got {keep}")
    cxx, cyy, cxy = moments.covariances()
    lx, px = _top_directions(cxx, keep)
    ly, py = _top_directions(cyy, keep)
    # CCA of the reduced data x' = x·px, y' = y·py: their covariances are diag(lx), diag(ly),
    # so the canonical correlations are the singular values of the whitened cross-covariance.
    whitened = (px.T @ cxy @ py) / torch.sqrt(torch.outer(lx, ly))
    rho = torch.linalg.svdvals(whitened).clamp(0.0, 1.0)
    return SVCCAResult(1.0 - float(rho.mean()), rho, (len(lx), len(ly)), moments.n)


def svcca_distance(x: torch.Tensor, y: torch.Tensor, keep: float = SVCCA_KEEP_VARIANCE) -> float:
    """1 − mean canonical correlation after keeping 99% of each representation's variance.

    ``x``: (samples, features_x), ``y``: (samples, features_y), rows paired. Raises
    ``InsufficientSamplesError`` when samples ≤ features.
    """
    return svcca_from_moments(CrossMoments.of(x, y), keep).distance


def cka_from_moments(moments: CrossMoments) -> float:
    cxx, cyy, cxy = moments.covariances()
    denom = torch.linalg.matrix_norm(cxx) * torch.linalg.matrix_norm(cyy)
    if not denom > 0:
        return math.nan
    return float(torch.linalg.matrix_norm(cxy) ** 2 / denom)


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA of two paired representations: 1 for identical, rotated or isotropically
    scaled copies; near 0 for independent ones (defined for any number of samples)."""
    return cka_from_moments(CrossMoments.of(x, y))
