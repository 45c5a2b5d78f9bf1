"""Per-trial summaries of the similarity table (one row per trial and layer) that the
layer-wise claims read as if they were scores: how weight change and attention change
grow with depth in one finetuned model (000 §6.3, 002 §3).

- ``rho_w_output``: Spearman ρ of the layer l = 1..L and the change of its output.dense
  weights, ‖W_l^FT − W_l^pre‖₂ against the pretrained checkpoint (000's code);
  ``rho_w_output_fro``: the same with the Frobenius norm against the trial's start (claims.md
  asks for both norms).
- ``js_late`` / ``js_early``: the mean attention JS divergence (002's formula) over the late
  layers (l/L > 3/4) and over the early and middle ones; ``rho_js``: Spearman ρ of l and JS.
- ``rho_svcca``: Spearman ρ of the layer l = 1..L and the SVCCA distance between its
  pretrained and finetuned outputs (002 §4).
- ``w_output_l1``, ``w_output_l2``, ...: layer l's output.dense change ‖W_l^FT − W_l^pre‖₂
  itself (000 §6.3's curves), one column per layer of the deepest model measured
  (``layer_columns``).
- ``rep_low_share``, ``rho_rep``, ``rep_gap``: of D_rep(l), the last layer's SVCCA distance
  from the finetuned model's when layer l alone is reverted to its pretrained weights (002
  §4 layer replacement): the largest D_rep over the low layers (l/L ≤ 0.45, 002's "0-10" of
  24) as a share of the largest over all; Spearman ρ of l and D_rep; the mean D_rep above the
  low layers minus that over them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

LAYER_DISTANCE = "w_output_l{}"
_PREFIX = LAYER_DISTANCE.format("")
VALUES = ("rho_w_output", "rho_w_output_fro", "js_late", "js_early", "rho_js", "rho_svcca",
          "rep_low_share", "rho_rep", "rep_gap")
LOW_DEPTH = 0.45  # 002 §4: layers 0-10 of 24
# what ``per_trial`` reads of the similarity table
SIMILARITY_COLUMNS = ("trial_id", "layer", "attention_js", "w_output_spectral_pretrained",
                      "w_output_fro", "svcca_distance", "replaced_svcca")


def _rho(layers: np.ndarray, values: np.ndarray) -> float:
    keep = np.isfinite(values)
    if keep.sum() < 3 or np.ptp(values[keep]) == 0:
        return np.nan
    return float(stats.spearmanr(layers[keep], values[keep]).statistic)


def _column(part: pd.DataFrame, name: str) -> np.ndarray:
    return (part[name].to_numpy(np.float64) if name in part
            else np.full(len(part), np.nan))


def _replacement(layers: np.ndarray, depth: np.ndarray, rep: np.ndarray) -> dict:
    keep = np.isfinite(rep)
    low = keep & (depth <= LOW_DEPTH)
    high = keep & (depth > LOW_DEPTH)
    if not (low.any() and high.any()) or np.nanmax(rep) <= 0:
        return dict.fromkeys(("rep_low_share", "rho_rep", "rep_gap"), np.nan)
    return {"rep_low_share": float(rep[low].max() / rep[keep].max()),
            "rho_rep": _rho(layers, rep),
            "rep_gap": float(rep[high].mean() - rep[low].mean())}


def per_trial(similarity: pd.DataFrame) -> pd.DataFrame:
    """One row per trial of the similarity table with ``VALUES`` and the per-layer
    distances (``layer_columns``; NaN where the trial did not measure it)."""
    if similarity is None or similarity.empty:
        return pd.DataFrame(columns=["trial_id", *VALUES])
    rows = []
    for trial_id, part in similarity[similarity["layer"] >= 1].groupby("trial_id", sort=False):
        layers = part["layer"].to_numpy(np.float64)
        depth = layers / layers.max()

        js = _column(part, "attention_js")
        late = depth > 0.75
        distance = _column(part, "w_output_spectral_pretrained")
        rows.append({
            "trial_id": trial_id,
            **{LAYER_DISTANCE.format(int(layer)): float(d)
               for layer, d in zip(layers, distance, strict=True) if np.isfinite(d)},
            "rho_w_output": _rho(layers, distance),
            "rho_w_output_fro": _rho(layers, _column(part, "w_output_fro")),
            "js_late": float(np.nanmean(js[late])) if np.isfinite(js[late]).any() else np.nan,
            "js_early": (float(np.nanmean(js[~late])) if np.isfinite(js[~late]).any()
                         else np.nan),
            "rho_js": _rho(layers, js),
            "rho_svcca": _rho(layers, _column(part, "svcca_distance")),
            **_replacement(layers, depth, _column(part, "replaced_svcca")),
        })
    frame = pd.DataFrame(rows)
    deepest = max((int(c[len(_PREFIX):]) for c in frame if c.startswith(_PREFIX)), default=0)
    columns = ["trial_id", *VALUES, *(LAYER_DISTANCE.format(n) for n in range(1, deepest + 1))]
    return frame.reindex(columns=columns)


def layer_columns(summaries: pd.DataFrame) -> list[str]:
    """The per-layer columns of ``per_trial``'s frame (``w_output_l1`` ...)."""
    return [c for c in summaries if c not in VALUES and c != "trial_id"]
