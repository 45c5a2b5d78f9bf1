"""Similarity measures against cases with known answers and against independent references:
SVCCA and CKA (002 §4, Raghu et al. 2017, Kornblith et al. 2019), attention JS divergence
(002 §3), weight distances (000 §4.5), and the per-layer comparison of two real models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from scipy.stats import ortho_group

from reinit_tune.similarity import measures as sim


def gaussian(n, d, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((n, d)))


def reference_svcca(x: np.ndarray, y: np.ndarray, keep=0.99) -> tuple[float, int, int]:
    """Raghu et al. 2017 on the data matrices: SVD of each centred matrix, keep the top
    singular directions explaining ``keep`` of the variance, CCA by QR of the reduced data
    (Björck–Golub), distance 1 − mean canonical correlation."""
    def reduce(a):
        a = a - a.mean(0)
        u, s, _ = np.linalg.svd(a, full_matrices=False)
        var = s ** 2
        k = int(np.searchsorted(np.cumsum(var) / var.sum(), keep)) + 1
        return u[:, :k] * s[:k], k
    xr, kx = reduce(x)
    yr, ky = reduce(y)
    qx, _ = np.linalg.qr(xr)
    qy, _ = np.linalg.qr(yr)
    rho = np.linalg.svd(qx.T @ qy, compute_uv=False)
    return 1 - rho.mean(), kx, ky


def test_svcca_matches_the_data_matrix_reference_with_low_rank_structure():
    rng = np.random.default_rng(1)
    latent = rng.standard_normal((3000, 5))
    x = latent @ rng.standard_normal((5, 40)) + 0.05 * rng.standard_normal((3000, 40))
    y = latent[:, :3] @ rng.standard_normal((3, 30)) + 0.5 * rng.standard_normal((3000, 30))
    expected, kx, ky = reference_svcca(x, y)
    result = sim.svcca_from_moments(sim.CrossMoments.of(torch.from_numpy(x),
                                                        torch.from_numpy(y)))
    assert result.dims == (kx, ky) and kx < 40  # the SVD step really dropped directions
    assert result.distance == pytest.approx(expected, abs=1e-9)
    assert len(result.correlations) == min(kx, ky)


def test_svcca_streamed_in_batches_equals_one_pass_with_large_feature_means():
    x = gaussian(2000, 20, 0) * 3 + 500.0  # large means: centring must not cancel badly
    y = x @ gaussian(20, 20, 1) + gaussian(2000, 20, 2)
    moments = sim.CrossMoments()
    for i in range(0, 2000, 300):
        moments.update(x[i:i + 300], y[i:i + 300])
    assert moments.n == 2000
    streamed = sim.svcca_from_moments(moments).distance
    assert streamed == pytest.approx(reference_svcca(x.numpy(), y.numpy())[0], abs=1e-9)
    assert sim.cka_from_moments(moments) == pytest.approx(sim.linear_cka(x, y), abs=1e-12)


def test_svcca_of_identical_or_rotated_representations_is_zero():
    x = gaussian(1000, 16)
    rotation = torch.from_numpy(ortho_group.rvs(16, random_state=0))
    assert sim.svcca_distance(x, x) == pytest.approx(0.0, abs=1e-9)
    assert sim.svcca_distance(x, x @ rotation) == pytest.approx(0.0, abs=1e-9)
    assert sim.svcca_distance(x, 7 * x @ rotation + 3) == pytest.approx(0.0, abs=1e-9)


def test_svcca_of_one_correlated_direction_is_one_minus_the_correlation():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(5000)
    b = 0.6 * a + 0.8 * rng.standard_normal(5000)
    x, y = torch.from_numpy(a[:, None]), torch.from_numpy(b[:, None])
    assert sim.svcca_distance(x, y) == pytest.approx(1 - abs(np.corrcoef(a, b)[0, 1]), abs=1e-9)


def test_svcca_of_independent_noise_is_high():
    assert sim.svcca_distance(gaussian(4000, 10, 0), gaussian(4000, 10, 1)) > 0.95


def test_svcca_refuses_fewer_samples_than_features():
    with pytest.raises(sim.InsufficientSamplesError, match="more samples than features"):
        sim.svcca_distance(gaussian(30, 64, 0), gaussian(30, 64, 1))
    with pytest.raises(sim.InsufficientSamplesError):
        sim.svcca_distance(gaussian(64, 64, 0), gaussian(64, 8, 1))


def test_linear_cka_known_answers():
    x = gaussian(500, 12)
    rotation = torch.from_numpy(ortho_group.rvs(12, random_state=1))
    assert sim.linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)
    assert sim.linear_cka(x, 2.5 * x @ rotation - 1) == pytest.approx(1.0, abs=1e-12)
    assert sim.linear_cka(gaussian(5000, 12, 0), gaussian(5000, 12, 1)) < 0.02
    # CKA is defined with fewer samples than features (no guard needed)
    assert 0 <= sim.linear_cka(gaussian(10, 50, 0), gaussian(10, 50, 1)) <= 1


def test_linear_cka_equals_the_centred_gram_matrix_formula():
    x, y = gaussian(80, 7, 0), gaussian(80, 5, 1) + 0.5 * gaussian(80, 7, 0)[:, :5]
    h = torch.eye(80, dtype=torch.float64) - 1 / 80
    kx, ky = h @ x @ x.T @ h, h @ y @ y.T @ h
    hsic = lambda a, b: (a * b).sum()  # noqa: E731
    expected = hsic(kx, ky) / torch.sqrt(hsic(kx, kx) * hsic(ky, ky))
    assert sim.linear_cka(x, y) == pytest.approx(float(expected), abs=1e-12)


def attention(batch, heads, tokens, seed):
    logits = torch.from_numpy(np.random.default_rng(seed).standard_normal(
        (batch, heads, tokens, tokens)))
    return logits.softmax(-1)


def test_js_divergence_matches_scipy_and_is_bounded_by_ln2():
    p, q = attention(1, 1, 6, 0)[0, 0, 2], attention(1, 1, 6, 1)[0, 0, 2]
    assert float(sim.js_divergence(p, q)) == pytest.approx(jensenshannon(p, q) ** 2, abs=1e-12)
    assert float(sim.js_divergence(p, p)) == 0.0
    disjoint = float(sim.js_divergence(torch.tensor([1.0, 0, 0]), torch.tensor([0, 0.5, 0.5])))
    assert disjoint == pytest.approx(math.log(2), abs=1e-12)


def test_attention_js_averages_real_tokens_then_heads_per_example():
    p, q = attention(2, 3, 5, 0), attention(2, 3, 5, 1)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    per_example = sim.attention_js_divergence(p, q, mask)
    # 002 §3, written out: (1/H) Σ_h (1/W) Σ_i JS over the W real tokens of each example
    for n, w in enumerate((5, 3)):
        expected = np.mean([np.mean([jensenshannon(p[n, h, i], q[n, h, i]) ** 2
                                     for i in range(w)]) for h in range(3)])
        assert float(per_example[n]) == pytest.approx(expected, abs=1e-12)
    changed = q.clone()
    changed[1, :, 3:] = attention(1, 3, 5, 9)[0, :, 3:]  # padding query rows do not count
    assert torch.equal(sim.attention_js_divergence(p, changed, mask)[1], per_example[1])
    assert torch.all(sim.attention_js_divergence(p, p, mask) == 0)
    assert torch.all(per_example <= math.log(2))


def test_weight_distances_known_answers():
    base = {"w": torch.zeros(4, 3), "bias": torch.zeros(3)}
    u, v = torch.tensor([1.0, 2, 0, 2]), torch.tensor([3.0, 0, 4])
    rank_one = {"w": torch.outer(u, v), "bias": torch.ones(3)}
    d = sim.weight_distances(rank_one, base)
    assert set(d) == {"w"}  # only matrices
    assert d["w"]["fro"] == pytest.approx(15.0) and d["w"]["spectral"] == pytest.approx(15.0)
    diag = sim.weight_distances({"w": torch.diag(torch.tensor([3.0, -4, 1]))},
                                {"w": torch.zeros(3, 3)})["w"]
    assert diag["spectral"] == pytest.approx(4.0) and diag["fro"] == pytest.approx(26 ** 0.5)
    assert sim.weight_distances(rank_one, rank_one)["w"] == {"fro": 0.0, "spectral": 0.0}
