"""Where the papers contradict each other (claims.md §7), for the report to set beside what
the store says: each question, what each paper says, and the claims whose verdicts decide
between them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Contradiction:
    id: str
    question: str
    sides: tuple[tuple[str, str], ...]  # (paper's claim id, what it says)
    decides: str  # the statistic that decides, in words
    note: str = ""


CONTRADICTIONS: tuple[Contradiction, ...] = (
    Contradiction(
        "X1", "CoLA: where is the useful pretrained knowledge?",
        (("000-C8", "a roughly linear curve: early and middle layers contribute equally"),
         ("001-C8", "at chance until 10 layers; layers 1 through 8 do not encode important "
                    "information"),
         ("003-C18", "reinitializing layer 1 alone hurts CoLA")),
        "G_CoLA(L/2) (about 0.5 under 000, about 0 under 001); N_1-3 on CoLA",
        "001 is cased, batch 32, with a near-uniform init"),
    Contradiction(
        "X2", "Does more data make the early layers worth more or less?",
        (("000-C1", "with more data the gains from pretrained information are lower (the "
                    "total gain T falls with n)"),
         ("004-C1", "parameters with tremendous gains when data is plentiful may give "
                    "negligible benefits when scarce (A(n) rises with n)")),
        "A(n) = s(q, n) - s(0, n) across sizes: 000 predicts it falls, 004 that it rises",
        "000-C1 (T falls) and 004-C1 can both hold; 000's literal 'each layer' and 004-C1 "
        "cannot"),
    Contradiction(
        "X3", "What does reinitializing only the top layer(s) do?",
        (("003-C17", "no single layer matters much"),
         ("001-C9", "on MRPC any reinit, even only layer 12, collapses to the majority "
                    "class")),
        "s(L) - s(L-1) and s(L) - s(L-2) as equivalence",
        "001's MRPC numbers are exactly the always-positive predictor, from single runs"),
    Contradiction(
        "X4", "Are the first few layers enough on their own?",
        (("003-C1", "the first three layers give most of the gain with plentiful data"),
         ("001-C6", "upstream layers have negligible effect until the middle layers")),
        "G(q) at sizes of 5k and more"),
)
