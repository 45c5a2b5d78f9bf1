"""Extractive question answering on SQuAD 2.0 as pure functions: the official metric, the
tokenized windows a model reads, and the mapping from start/end logits back to answer text.

Everything here reproduces a reference exactly, so that scores are comparable with published
ones. The metric is the official ``evaluate-v2.0.py`` of SQuAD 2.0 (Rajpurkar, Jia & Liang,
2018; https://rajpurkar.github.io/SQuAD-explorer/), except that scores are fractions in [0, 1].
Windows follow ``prepare_train_features`` and ``prepare_validation_features`` of Hugging Face
transformers' ``examples/pytorch/question-answering/run_qa.py``, and post-processing follows
``postprocess_qa_predictions`` of the ``utils_qa.py`` beside it with
``version_2_with_negative=True``. Tokenizers and logits come in as arguments, so this module
needs no torch and no model.
"""

from __future__ import annotations

import collections
import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reinit_tune.errors import InputError

__all__ = [
    "QAFeatures",
    "compute_exact",
    "compute_f1",
    "featurize",
    "normalize_answer",
    "postprocess",
    "squad_v2_scores",
]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


# --- The official SQuAD 2.0 metric (evaluate-v2.0.py) ---------------------------------------


def normalize_answer(s: str) -> str:
    """Lower case, drop punctuation, then the articles a/an/the, then collapse whitespace.

    ``normalize_answer`` of the official SQuAD 2.0 ``evaluate-v2.0.py``, in its order:
    punctuation goes before articles, so "the-end" loses its hyphen but keeps "theend".
    """
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _tokens(s: str) -> list[str]:
    return normalize_answer(s).split() if s else []


def compute_exact(a_gold: str, a_pred: str) -> int:
    """1 when gold and prediction normalize to the same string, else 0 (official script)."""
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold: str, a_pred: str) -> float:
    """Bag-of-tokens F1 of the normalized answers, as the official ``compute_f1``.

    An empty side (no answer, or text that normalizes to nothing) scores 1 only when both
    sides are empty.
    """
    gold_toks = _tokens(a_gold)
    pred_toks = _tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return float(gold_toks == pred_toks)
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_toks)
    recall = num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def squad_v2_scores(
    predictions: Mapping[str, str], answers: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """Exact match and F1 over questions, overall and split into HasAns and NoAns.

    As the official ``evaluate-v2.0.py`` run without a no-answer probability file: a
    question's gold answers are its reference texts that normalize to something non-empty,
    or ``[""]`` when none does; its exact and F1 are the maxima over those. A question counts
    as HasAns when it has any reference text at all (``bool(qa["answers"])`` there), so a
    question whose only reference is "the" is HasAns yet scored against "".

    Unlike the official script, scores are fractions in [0, 1], not percentages, like every
    other metric in this package; ``HasAns_total`` and ``NoAns_total`` are counts. The exact
    and F1 of an empty group are NaN. ``answers`` maps each question id to its reference
    texts (empty for an unanswerable question); every prediction needs a reference and every
    reference a prediction, since the official script silently skips missing predictions.
    """
    missing = [qid for qid in answers if qid not in predictions]
    extra = [qid for qid in predictions if qid not in answers]
    if missing or extra:
        raise InputError(
            f"predictions and answers must cover the same question ids: {len(missing)} without "
            f"a prediction (e.g. {missing[:3]}), {len(extra)} without a reference "
            f"(e.g. {extra[:3]})"
        )
    if not answers:
        raise InputError("no questions to score: predictions and answers are empty")
    exact: dict[str, float] = {}
    f1: dict[str, float] = {}
    has_ans: list[str] = []
    no_ans: list[str] = []
    for qid, texts in answers.items():
        if isinstance(texts, str):
            raise InputError(f"answers[{qid!r}] must be a list of reference texts, not a string")
        gold = [t for t in texts if normalize_answer(t)] or [""]
        pred = predictions[qid]
        exact[qid] = max(compute_exact(g, pred) for g in gold)
        f1[qid] = max(compute_f1(g, pred) for g in gold)
        (has_ans if len(texts) > 0 else no_ans).append(qid)

    def mean(scores: dict[str, float], qids: Sequence[str]) -> float:
        return sum(scores[q] for q in qids) / len(qids) if qids else math.nan

    every = list(answers)
    return {
        "exact": mean(exact, every),
        "f1": mean(f1, every),
        "HasAns_exact": mean(exact, has_ans),
        "HasAns_f1": mean(f1, has_ans),
        "HasAns_total": len(has_ans),
        "NoAns_exact": mean(exact, no_ans),
        "NoAns_f1": mean(f1, no_ans),
        "NoAns_total": len(no_ans),
    }


# --- Windows (run_qa.py: prepare_train_features / prepare_validation_features) -------------


@dataclass(frozen=True, eq=False)
class QAFeatures:
    """Tokenized windows ("features") of question/context pairs, one entry per window.

    - ``input_ids``: token ids, unpadded, so windows differ in length.
    - ``token_type_ids``: segment ids, or None when the tokenizer returns none.
    - ``start_positions``, ``end_positions`` (int64): token indices of the first gold
      answer, or ``cls_index`` when the example is unanswerable or that answer is not wholly
      inside the window; labelled for every window, as ``prepare_train_features`` does.
    - ``example_index`` (int64): which input example the window came from.
    - ``cls_index`` (int64): where the CLS token is; the null answer's position.
    - ``offsets``: (start, end) character offsets into the context for context tokens, None
      for question and special tokens, as ``prepare_validation_features`` stores them.
    """

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    start_positions: np.ndarray
    end_positions: np.ndarray
    example_index: np.ndarray
    cls_index: np.ndarray
    offsets: list[list[tuple[int, int] | None]]

    def __len__(self) -> int:
        return len(self.input_ids)


def _answer_lists(answer: Any, row: int) -> tuple[list[str], list[int]]:
    if not isinstance(answer, Mapping) or "text" not in answer or "answer_start" not in answer:
        raise InputError(
            f"answers[{row}] must be a dict with 'text' and 'answer_start' lists "
            f"(the SQuAD schema), got {answer!r}"
        )
    texts, starts = list(answer["text"]), list(answer["answer_start"])
    if len(texts) != len(starts):
        raise InputError(
            f"answers[{row}] has {len(texts)} texts but {len(starts)} answer_start values"
        )
    return texts, [int(s) for s in starts]


def _cls_index(input_ids: list[int], tokenizer: Any) -> int:
    # run_qa.py labels impossible answers with the CLS token, or BOS for tokenizers without one.
    for special in (getattr(tokenizer, "cls_token_id", None),
                    getattr(tokenizer, "bos_token_id", None)):
        if special is not None and special in input_ids:
            return input_ids.index(special)
    return 0


def featurize(
    questions: Sequence[str],
    contexts: Sequence[str],
    answers: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    *,
    max_length: int = 384,
    stride: int = 128,
) -> QAFeatures:
    """Split each question/context pair into overlapping windows and label the answer tokens.

    The union of run_qa.py's ``prepare_train_features`` (start/end labels) and
    ``prepare_validation_features`` (context-only offsets): questions are left-stripped, the
    question comes first when the tokenizer pads on the right (else the context comes first
    and the other side is truncated), only the context is truncated, and consecutive windows
    of one context share ``stride`` tokens. No padding is added. ``answers`` follows the SQuAD
    schema, ``{"text": [...], "answer_start": [...]}`` with empty lists for unanswerable
    questions; only the first gold answer is labelled, as in run_qa.py. ``tokenizer`` must be
    a Hugging Face fast tokenizer (offsets and ``sequence_ids`` come from it).
    """
    if not (len(questions) == len(contexts) == len(answers)):
        raise InputError(
            f"questions, contexts and answers must have one entry per example, got "
            f"{len(questions)}, {len(contexts)} and {len(answers)}"
        )
    if not getattr(tokenizer, "is_fast", False):
        raise InputError(
            "featurize needs a fast (Rust) tokenizer for offsets and sequence ids; load it with "
            "AutoTokenizer.from_pretrained(..., use_fast=True)"
        )
    if max_length < 1 or stride < 0 or stride >= max_length:
        raise InputError(
            f"need 0 <= stride < max_length, got max_length={max_length}, stride={stride}"
        )
    gold = [_answer_lists(a, row) for row, a in enumerate(answers)]
    pad_on_right = tokenizer.padding_side == "right"
    # Leading spaces in a question cost window room and break truncation (run_qa.py's comment).
    stripped = [q.lstrip() for q in questions]
    first, second = (stripped, list(contexts)) if pad_on_right else (list(contexts), stripped)
    try:
        enc = tokenizer(
            first,
            second,
            truncation="only_second" if pad_on_right else "only_first",
            max_length=max_length,
            stride=stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=False,
        )
    except Exception as err:
        # The Rust tokenizer raises a bare Exception when the question leaves no room.
        if "Truncation error" in str(err):
            raise InputError(
                f"max_length={max_length} with stride={stride} leaves no room for the context "
                f"after the longest question; raise max_length or lower stride ({err})"
            ) from err
        raise
    context_side = 1 if pad_on_right else 0
    sample_mapping = enc["overflow_to_sample_mapping"]
    starts: list[int] = []
    ends: list[int] = []
    cls_indices: list[int] = []
    offsets_out: list[list[tuple[int, int] | None]] = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        input_ids = enc["input_ids"][i]
        cls_index = _cls_index(input_ids, tokenizer)
        sequence_ids = enc.sequence_ids(i)
        texts, answer_starts = gold[sample_mapping[i]]
        start, end = cls_index, cls_index
        if answer_starts:
            start_char = answer_starts[0]
            end_char = start_char + len(texts[0])
            token_start = 0
            while sequence_ids[token_start] != context_side:
                token_start += 1
            token_end = len(input_ids) - 1
            while sequence_ids[token_end] != context_side:
                token_end -= 1
            if offsets[token_start][0] <= start_char and offsets[token_end][1] >= end_char:
                # Walk inwards to the tokens that hold the answer's first and last characters.
                while token_start < len(offsets) and offsets[token_start][0] <= start_char:
                    token_start += 1
                while offsets[token_end][1] >= end_char:
                    token_end -= 1
                start, end = token_start - 1, token_end + 1
        starts.append(start)
        ends.append(end)
        cls_indices.append(cls_index)
        offsets_out.append([
            (int(o[0]), int(o[1])) if sequence_ids[k] == context_side else None
            for k, o in enumerate(offsets)
        ])
    token_type_ids = enc.get("token_type_ids")
    return QAFeatures(
        input_ids=[list(ids) for ids in enc["input_ids"]],
        token_type_ids=None if token_type_ids is None else [list(t) for t in token_type_ids],
        start_positions=np.asarray(starts, dtype=np.int64),
        end_positions=np.asarray(ends, dtype=np.int64),
        example_index=np.asarray(sample_mapping, dtype=np.int64),
        cls_index=np.asarray(cls_indices, dtype=np.int64),
        offsets=offsets_out,
    )


# --- Post-processing (utils_qa.py: postprocess_qa_predictions) -----------------------------


def postprocess(
    contexts: Sequence[str],
    ids: Sequence[str],
    features: QAFeatures,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    *,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    null_score_diff_threshold: float = 0.0,
) -> dict[str, str]:
    """Turn per-window start/end logits into one answer text per example ("" = no answer).

    ``postprocess_qa_predictions`` of transformers' ``utils_qa.py`` with
    ``version_2_with_negative=True``: an example's null score is the smallest CLS start+end
    logit over its windows; candidates pair the ``n_best_size`` highest start and end logits
    of each window, keeping context tokens with ``start <= end`` and at most
    ``max_answer_length`` tokens; the ``n_best_size`` best candidates, with the null answer,
    are ranked by start+end logit; the answer is "" when the null score exceeds the best
    non-null candidate's by more than ``null_score_diff_threshold``, else that candidate's
    context text. The CLS logit is read at ``features.cls_index`` (index 0 in utils_qa.py,
    the same for BERT-style tokenizers). Kept from utils_qa.py: when no valid span exists the
    answer is "" if the null score is above the threshold, else the placeholder "empty".

    ``contexts`` and ``ids`` list the examples passed to ``featurize`` (in that order);
    ``start_logits`` and ``end_logits`` have one row per window, padded or not (positions
    past a window's length are never chosen).
    """
    if len(contexts) != len(ids):
        raise InputError(f"got {len(contexts)} contexts but {len(ids)} ids")
    if len(set(ids)) != len(ids):
        raise InputError("example ids must be unique")
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise InputError(
            f"need one row of logits per feature: {len(features)} features, "
            f"{len(start_logits)} start rows, {len(end_logits)} end rows"
        )
    if n_best_size < 1 or max_answer_length < 1:
        raise InputError(
            f"n_best_size and max_answer_length must be >= 1, got {n_best_size} and "
            f"{max_answer_length}"
        )
    if len(features) and (features.example_index.min() < 0
                          or features.example_index.max() >= len(ids)):
        raise InputError(
            f"features refer to examples outside the {len(ids)} given; pass the same examples "
            f"as to featurize"
        )
    features_per_example: dict[int, list[int]] = collections.defaultdict(list)
    for feature, example in enumerate(features.example_index.tolist()):
        features_per_example[example].append(feature)

    predictions: dict[str, str] = {}
    for example, (qid, context) in enumerate(zip(ids, contexts, strict=True)):
        null_score = None
        # (score, start logit, end logit, (start char, end char), is the null answer)
        candidates: list[tuple[Any, Any, Any, tuple[int, int], bool]] = []
        for feature in features_per_example[example]:
            starts = np.asarray(start_logits[feature])
            ends = np.asarray(end_logits[feature])
            offsets = features.offsets[feature]
            cls = int(features.cls_index[feature])
            feature_null = starts[cls] + ends[cls]
            # Strict ">": the first window wins ties, as in utils_qa.py.
            if null_score is None or null_score > feature_null:
                null_score, null_start, null_end = feature_null, starts[cls], ends[cls]
            # Same slice of the same argsort as utils_qa.py, so ties break identically.
            start_indexes = np.argsort(starts)[-1 : -n_best_size - 1 : -1].tolist()
            end_indexes = np.argsort(ends)[-1 : -n_best_size - 1 : -1].tolist()
            for s in start_indexes:
                for e in end_indexes:
                    if (s >= len(offsets) or e >= len(offsets)
                            or offsets[s] is None or offsets[e] is None):
                        continue
                    if e < s or e - s + 1 > max_answer_length:
                        continue
                    span = (offsets[s][0], offsets[e][1])
                    candidates.append((starts[s] + ends[e], starts[s], ends[e], span, False))
        if null_score is None:
            raise InputError(f"example {qid!r} has no features; featurize it with the others")
        null = (null_score, null_start, null_end, (0, 0), True)
        candidates.append(null)
        # sorted() is stable, so equal scores keep utils_qa.py's insertion order.
        ranked = sorted(candidates, key=lambda c: c[0], reverse=True)[:n_best_size]
        if not any(c[4] for c in ranked):
            ranked.append(null)
        texts = ["" if c[4] else context[c[3][0] : c[3][1]] for c in ranked]
        logit_pairs = [(c[1], c[2]) for c in ranked]
        if len(ranked) == 1 and texts[0] == "":
            # utils_qa.py's fallback when no span survived: a zero-logit "empty" candidate.
            texts.insert(0, "empty")
            logit_pairs.insert(0, (0.0, 0.0))
        best = next((i for i, t in enumerate(texts) if t != ""), None)
        if best is None:
            # Only zero-width spans survived (utils_qa.py would fail here): no answer.
            predictions[qid] = ""
            continue
        best_start, best_end = logit_pairs[best]
        score_diff = null_score - best_start - best_end
        predictions[qid] = "" if score_diff > null_score_diff_threshold else texts[best]
    return predictions
