"""What the papers publish, shown beside our numbers in the report: the values they print
(003 Table 1; 001's sequential matrix, its head baselines and per-head differences, its MRPC
numbers) and, for every figure, the trend the paper states in its own words. Figures whose
numbers exist only as images get the stated trend alone.

Values are copied as printed; where a paper contradicts itself the caption says so.
"""

from __future__ import annotations

import pandas as pd

from reinit_tune.analysis import frames, heads, permutations, sequential
from reinit_tune.analysis.baselines import trivial_predictor

TRENDS = {
    "progressive": "003 Fig. 1: \"First three BERT layers provide the majority of improvement "
                   "... when finetuning data is plentiful, while more layers are helpful when "
                   "data is scarce ... probing performance does not indicate which BERT layers "
                   "are necessary.\"",
    "small_data": "003 Fig. 4: every 500-example run as a dot; \"Dotted line shows the mean\".",
    "localized": "003 Fig. 2: \"Early layers provide the most QNLI gains, but middle ones yield "
                 "an added boost for CoLA and SST-2.\"",
    "single_layer": "003 Fig. 5: \"little effect on finetuning metrics from reinitializing each "
                    "layer (with the exception of reinitializing the first layer on CoLA)\".",
    "permutations": "003 Fig. 3: \"Changing the order of pretrained layers harms finetuning "
                    "performance significantly\", to \"not much above a randomly-initialized "
                    "network\"; Table 1: specific permutations have similar impacts across "
                    "tasks.",
    "variants": "003 App. E, F: a 5x learning rate on the reinitialized layers \"does not "
                "improve finetuning performance ... appears to increase the variance\"; "
                "preserving LayerNorm \"does not aid (and may even harm) finetuning\".",
    "epochs": "003 App. D: \"minimal effects of training longer than three epochs for the "
              "subsamples of 5k\", \"improvements of several percentage points\" with five "
              "epochs at 500.",
    "heads": "001 Figs 7-10: heads of layers 1 or 2 decrease performance \"up to the 75th "
             "percentile\"; \"reinitializing any attention head in the downstream layers "
             "improves the model performance\"; heads 4 and 9 hurt, head 12 helps on average.",
    "sequential": "001 Fig. 2: WNLI as the intermediate task beats the baseline for every final "
                  "task except RTE.",
    "000-progressive": "000 Fig. 1: for SST-2 the drop is \"less concave as training data size "
                       "decreases\"; for QNLI \"as training data size decreases, the "
                       "pre-trained information from more and more earlier layers becomes "
                       "important\"; CoLA drops \"fairly linear\".",
    "000-probing": "000 Fig. 2: probing \"reaches a lower peak accuracy\"; the top two layers "
                   "\"hurt the performance\"; QNLI shows \"a steep decline when we remove the "
                   "sixth layer\".",
    "000-distance": "000 Fig. 3: \"parallel upward shifts with increased data size\"; the "
                    "curves are \"upward trending\", \"steeper when the data size is bigger\".",
    "001-layers": "001 Fig. 3: RTE flat before layer 7, k in 8..12 above no reinitialization; "
                  "SQuAD \"mostly increases monotonically, except ... k = 9\"; STS-B spikes to "
                  "about 0.5 at layer 8; CoLA \"flat until adding back layer 10, where it jumps "
                  "to 0.6\" (001's k is ours + 1).",
    "001-layers-loss": "001 Fig. 4: with layer 10 reinitialized the loss \"continues to "
                       "decrease beyond the 3 epochs\".",
    "001-sequential": "001 Fig. 2: WNLI as the intermediate task beats the baseline for every "
                      "final task except RTE.",
    "001-heads": "001 Figs 7-10: heads of layers 1 or 2 decrease performance \"up to the 75th "
                 "percentile\"; downstream heads improve it; heads 4 and 9 hurt, 12 helps.",
    "002-dynamics": "002 Figs 1-3: the attention of low and intermediate layers does \"not "
                    "change seriously, while the attention mode of last layers changes "
                    "drastically\"; representation changes \"in higher layers are more distinct "
                    "than lower layers\"; replacing low layers \"has little effect\".",
    "002-consistency": "002 Figs 4-7: across seeds attention is \"basically consistent\" in low "
                       "and intermediate layers, \"relatively divergent\" in the last ones, "
                       "while the SVCCA distance \"gradually increases in all layers\"; across "
                       "datasets low layers are \"consistent\", higher ones \"more distinct when "
                       "the difference between two training datasets increases\".",
}
TRENDS["003-permutations-authors"] = TRENDS["permutations"]

# 003 Table 1 (N = 10): coefficient (two-sided p).
TABLE_1 = pd.DataFrame([
    ("sst2", "qnli", 0.72, 0.02, 0.46, 0.18),
    ("sst2", "cola", 0.74, 0.02, 0.77, 0.01),
    ("qnli", "cola", 0.83, 0.00, 0.68, 0.03),
], columns=["task_a", "task_b", "spearman", "spearman_p", "pearson", "pearson_p"])

# 001 §5.5 ("Figure 2"): rows final task, columns intermediate task, the diagonal direct.
SEQUENTIAL_001 = {
    "cola": {"cola": 0.526, "mrpc": 0.523, "rte": 0.526, "wnli": 0.536},
    "mrpc": {"cola": 0.757, "mrpc": 0.776, "rte": 0.732, "wnli": 0.786},
    "rte": {"cola": 0.462, "mrpc": 0.610, "rte": 0.635, "wnli": 0.588},
    "wnli": {"cola": 0.408, "mrpc": 0.394, "rte": 0.464, "wnli": 0.549},
}

# 001 §5.7 baselines and Figs 5-6: score change per reinitialized head, layers 1, 2, 11, 12.
HEAD_BASELINES_001 = {"cola": 0.526, "stsb": 0.872}
HEAD_DIFFS_001 = {
    "cola": {
        1: [0.008, -0.023, -0.005, -0.015, 0.01, -0.018, -0.015, -0.014, -0.026, -0.005, 0.011,
            -0.007],
        2: [-0.016, -0.007, -0.004, -0.045, -0.015, -0.031, -0.018, -0.043, -0.047, 0, -0.016,
            -0.017],
        11: [0.002, 0.013, 0.002, -0.013, 0.02, 0, 0.002, 0.007, 0.002, 0.013, 0.013, 0.015],
        12: [0.008, -0.002, -0.002, -0.002, 0.002, 0.002, 0, 0.005, 0.005, 0.016, 0.002, 0.005],
    },
    "stsb": {
        1: [0.002, 0.002, -0.002, -0.003, -0.003, -0.007, -0.004, -0.001, -0.007, -0.001,
            -0.005, -0.003],
        2: [-0.001, -0.001, -0.001, -0.004, -0.002, -0.006, -0.003, -0.002, -0.023, -0.001,
            -0.004, -0.001],
        11: [-0.003, 0.003, 0.004, -0.002, 0, 0.003, 0, -0.003, -0.002, 0.002, 0, 0.003],
        12: [0, -0.002, 0.003, -0.004, 0.001, 0.001, 0, 0.005, 0, 0, 0.001, 0.004],
    },
}
# 001 §5.6, MRPC: no reinitialization vs "reinitialize any k layers".
MRPC_001 = pd.DataFrame([("acc_and_f1", 0.812, 0.7480253018237863), ("f1", 0.848, 0.812),
                         ("accuracy", 0.776, 0.683)],
                        columns=["metric", "published: no reinit", "published: reinit any k"])


def _table_1(store: frames.Store, experiment: str) -> pd.DataFrame:
    ours = permutations.permutation_correlations(store.trials, experiment)
    merged = TABLE_1.merge(ours, on=["task_a", "task_b"], how="left",
                           suffixes=(" (003)", " (ours)"))
    order = ["task_a", "task_b", "size", "n", *(f"{m} ({w})" for m in (
        "spearman", "spearman_p", "pearson", "pearson_p") for w in ("003", "ours"))]
    return merged[[c for c in order if c in merged]]


def _settings(labels: pd.Series) -> list[str]:
    """The split settings of task labels ("rte · lr 5e-05" → "lr 5e-05"); [""] for none."""
    found = list(dict.fromkeys(str(t).partition(" · ")[2] for t in labels))
    return found or [""]


def _sequential(store: frames.Store, experiment: str, best_of: int | None) -> pd.DataFrame:
    ours = sequential.sequential_table(store.trials, experiment, best_of)
    rows = []
    for setting in list(dict.fromkeys(ours["setting"])) or [""]:
        mine_all = ours[ours["setting"] == setting]
        for final, row in SEQUENTIAL_001.items():
            for intermediate, value in row.items():
                mine = mine_all[(mine_all["final"] == final)
                                & (mine_all["intermediate"] == intermediate)]
                rows.append({"setting": setting, "final": final, "intermediate": intermediate,
                             "001": value, "ours": mine["mean"].iloc[0] if len(mine) else None,
                             "ours n": int(mine["n"].iloc[0]) if len(mine) else 0})
    return _drop_empty_setting(pd.DataFrame(rows))


def _drop_empty_setting(table: pd.DataFrame) -> pd.DataFrame:
    """No setting column where the rows hold a single configuration."""
    if "setting" in table and (table["setting"] == "").all():
        return table.drop(columns="setting")
    return table


def _heads(store: frames.Store, experiment: str) -> pd.DataFrame:
    ours = heads.head_differences(store.trials, experiment)
    rows = []
    for setting in _settings(ours["task"]):
        for task, layers in HEAD_DIFFS_001.items():
            label = f"{task} · {setting}" if setting else task
            for layer, diffs in layers.items():
                for head, value in enumerate(diffs, start=1):
                    # 001's layers 1, 2, 11, 12 of 12; ours are numbered 1..L as well
                    mine = ours[(ours["task"] == label) & (ours["layer"] == layer)
                                & (ours["head"] == head)]
                    rows.append({"setting": setting, "task": task, "layer": layer,
                                 "head": head, "001 diff": value,
                                 "ours diff": mine["diff"].iloc[0] if len(mine) else None,
                                 "001 baseline": HEAD_BASELINES_001[task],
                                 "ours baseline": mine["baseline"].iloc[0] if len(mine)
                                 else None})
    return _drop_empty_setting(pd.DataFrame(rows))


def _mrpc(store: frames.Store, experiment: str) -> pd.DataFrame:
    ok = frames.ok(store.trials, experiment)
    mrpc = frames.split(ok[ok["task"] == "mrpc"], ("task", "train_size"),
                        ("reinit_layers",))
    tables = []
    for setting in list(dict.fromkeys(mrpc["setting"])) or [""]:
        rows = mrpc[mrpc["setting"] == setting]
        table = MRPC_001.copy()
        table.insert(0, "setting", setting)
        full = rows[rows["num_pretrained_layers"] == rows["num_layers"]]
        reinit = rows[rows["num_pretrained_layers"] < rows["num_layers"]]
        table["ours: no reinit"] = [full[f"eval_{m}"].mean() if len(full) else None
                                    for m in table["metric"]]
        table["ours: reinit any k (mean)"] = [reinit[f"eval_{m}"].mean() if len(reinit)
                                              else None for m in table["metric"]]
        # 001's "reinitialize any k" values are what predicting "paraphrase" for every dev
        # example scores: say so where the dev labels show it
        table['published "reinit any k" equals'] = [
            trivial_predictor("mrpc", m, v) or "" for m, v in
            zip(table["metric"], table["published: reinit any k"], strict=True)]
        tables.append(table)
    return _drop_empty_setting(pd.concat(tables, ignore_index=True))


def beside(key: str, store: frames.Store, best_of: int | None = None
           ) -> dict[str, pd.DataFrame]:
    """The published numbers of the figure ``key`` next to ours (empty where the paper
    prints none), aggregated as the figure is (``best_of``: see ``sequential``); one block
    of rows per setting where the store holds several (``frames.split``)."""
    if key in ("permutations", "003-permutations-authors"):
        return {"003 Table 1 (N = 10) beside ours": _table_1(store, key)}
    if key in ("sequential", "001-sequential"):
        return {"001 §5.5 (its Figure 2) beside ours: final task after the intermediate one "
                "(001 gives MRPC's baseline as 0.776 here and 0.777 in §6.1)":
                _sequential(store, key, best_of)}
    if key in ("heads", "001-heads"):
        return {"001 Figs 5-6 and §5.7 baselines beside ours (001 labels the CoLA baseline a "
                "correlation and STS-B's an MCC; swapped here)": _heads(store, key)}
    if key == "001-layers":
        return {"001 §5.6: MRPC, published beside ours": _mrpc(store, key)}
    return {}
