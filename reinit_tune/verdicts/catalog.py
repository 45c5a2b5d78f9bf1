"""The papers' claims that reinit-tune decides, as declarations (claims.md, by id).

Each entry is data for the engine (``reinit_tune.verdicts.engine``): adding a claim of an
existing statistic kind is adding an entry here. Thresholds the papers leave open (0.5 for
"majority", 0.1 of the gain for "little effect") are claims.md's, printed with the verdict.
The module is long because it is a list: one declaration per claim, nothing else.
"""

from __future__ import annotations

from reinit_tune.verdicts.claim import Claim
from reinit_tune.verdicts.conditions import (
    After,
    Block,
    Heads,
    Kept,
    Layer,
    Permuted,
    Probe,
)
from reinit_tune.verdicts.contrasts import (
    GAIN,
    AcrossSizes,
    All,
    AtChance,
    ByTask,
    Contrast,
    EveryLayer,
    Jump,
    SizeContrast,
)
from reinit_tune.verdicts.curves import (
    CurveArea,
    FlatMiddle,
    KneeShift,
    LinearDrop,
    ShareShift,
    Trend,
    UnevenSteps,
)
from reinit_tune.verdicts.localized import BlockProfiles, MiddleShares
from reinit_tune.verdicts.pairs import SeedDivergence, TaskDivergence
from reinit_tune.verdicts.probes import (
    BestProbeBelowFinetuning,
    CurveGap,
    CurveGapShift,
    ProbeContrast,
    ProbedBlock,
    ProbeNearChance,
    ProbePeak,
    ProbesNeedMoreLayers,
    WithProbes,
)
from reinit_tune.verdicts.rule import Rule
from reinit_tune.verdicts.spreads import SpreadRatio, TaskCorrelation
from reinit_tune.verdicts.trial_values import EpochGain, LayerShift, SeedValue

E, Q, F = Kept("E"), Kept("q"), Kept("F")
EARLY_GAIN = ((Q, 1.0), (E, -1.0))  # A(n) = s(q) - s(0)
LATE_GAIN = ((F, 1.0), (Q, -1.0))  # M(n) = s(L) - s(q)
G_Q = (EARLY_GAIN, GAIN)  # G(q) = A / T, displayed
TASKS_003 = ("sst2", "qnli", "cola")
LESS = Rule("directional", -1)


def _variant(multiplier: float = 1.0, layernorm: bool = False):
    """Mean over k = 0..L−1 of s(variant, k) − s(standard, k) (003 App. E/F; k = L has no
    reinitialized layer, so the variant equals the baseline there)."""
    def terms(num_layers: int):
        w = 1.0 / num_layers
        return [term for k in range(num_layers)
                for term in ((Kept(k, multiplier, layernorm), w), (Kept(k), -w))]
    return terms


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "003-C1", "003", "P1", "first quarter of layers gives > half the gain (plentiful data)",
        "003 Fig. 1 caption; §1 finding 1; §2",
        "First three BERT layers provide the majority of improvement on downstream metrics "
        "when finetuning data is plentiful",
        Contrast(((E, -0.5), (Q, 1.0), (F, -0.5)), needs_gain=True, share=G_Q),
        "c = s(q) - (s(0) + s(L))/2 (> 0 iff G(q) > 0.5); share G(q)",
        sizes="plentiful", tasks=("sst2", "qnli"), uses_q=True,
        caveat="§1 says 'first few', the caption 'first three': the first quarter of depth"),
    Claim(
        "003-C2", "003", "P1", "less data needs more pretrained layers (share)",
        "003 Fig. 1 caption; §2", "more layers are helpful when data is scarce",
        ShareShift("q"), "d = G_large(q) - G_small(q), seed bootstrap",
        tasks=TASKS_003, uses_q=True,
        caveat="the paper trains 5 epochs at 500 and 3 otherwise: size and epochs confounded"),
    Claim(
        "003-C3", "003", "P1", "less data, middle and later layers matter more (absolute)",
        "003 Abstract; §2",
        "the less finetuning data one has, the more important the middle and later layers "
        "of BERT become",
        SizeContrast(LATE_GAIN), "M(small) - M(large), M(n) = s(L) - s(q), Welch",
        tasks=TASKS_003, uses_q=True),
    Claim(
        "003-C4", "003", "P1", "layers that probe well are neither necessary nor sufficient",
        "003 Abstract; Fig. 1 caption; §3; §4 (its definitions)",
        "layers with high probing accuracy on downstream GLUE tasks are neither necessary nor "
        "sufficient for high accuracy on those tasks",
        ProbedBlock(),
        "H = best-probing block; (a) 0.9F - P_H + 0.1E > 0 (not sufficient) and (b) 0.9F - "
        "R_H + 0.1E < 0 (not necessary), paired by seed",
        tasks=("sst2", "qnli"), figure="localized",
        caveat="the 0.9 and 0.1 thresholds are claims.md's; which block is H depends on how "
               "the probe is trained (pooling, lr, epochs)"),
    Claim(
        "003-C5", "003", "P1", "SST-2: early layers probe near chance yet give large gains",
        "003 §3",
        "these early layer parameters exhibit significant transferability: preserving them "
        "while reinitializing all other layers enables large gains in finetuning accuracy",
        WithProbes((("A(n) = s(q) - s(0) > 0", Contrast(
            EARLY_GAIN, rule=Rule("threshold", 0.0, margin="against-abs"), share=G_Q)),
                    ("003-C6(b): probes of layers 1..q near chance", ProbeNearChance()))),
        "A(n) = s(q) - s(0) (contradicted below delta_abs) and every probe of layers 1..q "
        "within 0.05 of chance; share G(q) shown",
        sizes="not scarce", tasks=("sst2",), only_tasks=True, uses_q=True,
        caveat="'large' is not quantified: G(q) is shown beside A"),
    Claim(
        "003-C6", "003", "P2", "SST-2 probing peaks late and is near chance in layers 1-3",
        "003 §3",
        "the probing accuracy of SST-2 is highest in the later layers of the network and near "
        "chance at the earliest three layers",
        ProbePeak(), "P(the best probe is at a hidden state > 3L/4), probe-seed bootstrap",
        tasks=("sst2",), only_tasks=True, figure="probing",
        caveat="part (b), the early probes near chance, is 003-C5's second part; a "
               "well-optimized probe of mean-pooled early layers is usually above chance"),
    Claim(
        "003-C7", "003", "P2", "CoLA: probes at chance in every layer, finetuning high",
        "003 §3; compare 000 App. B",
        "while no layers of BERT contain explicit knowledge of the CoLA task as measured by "
        "probing, the parameters ... still enable ... a high-performing model",
        WithProbes((("a: every probe within 0.05 of chance", ProbeNearChance("all")),
                    ("b: full model above the best probe", BestProbeBelowFinetuning()))),
        "(a) every probe's upper bound <= chance + 0.05, Bonferroni; (b) s(L) - best probe, "
        "Welch", tasks=("cola",), only_tasks=True,
        caveat="MCC 0 is also what a probe that always predicts the majority class scores"),
    Claim(
        "003-C8", "003", "P2", "small-data finetuning curves resemble the probing curves",
        "003 §3; 004 v2 Fig. 2 caption",
        "the curves for the smallest-data regime bear a greater similarity to the probing "
        "curves, especially for SST-2 and QNLI",
        CurveGapShift(), "D(large) - D(small), D = mean over k of |G(k) - P(k)| with both "
        "curves normalized (bootstrap over each size's seeds and the probe seeds)",
        tasks=("sst2", "qnli"),
        caveat="D's form is ours (min-max normalized probes); the increment correlation, the "
               "secondary statistic, is not evaluated"),
    Claim(
        "003-C9", "003", "P1", "early blocks help more than late blocks",
        "003 §4; Fig. 2",
        "the earlier layers appear to be generally more helpful for finetuning relative to "
        "the later layers",
        All((("a: P_first - P_last > 0",
              Contrast(((Block(0, True), 1.0), (Block(3, True), -1.0)))),
             ("b: R_last - R_first > 0",
              Contrast(((Block(3, False), 1.0), (Block(0, False), -1.0)))))),
        "(a) s(only first block kept) - s(only last block kept); (b) shown in the reason",
        tasks=TASKS_003, figure="localized"),
    Claim(
        "003-C10", "003", "P2", "QNLI relies most on the early layers (part a)",
        "003 §4; Fig. 2 caption",
        "QNLI appears to be less able to reconstruct processing in the early layers relative "
        "to the other two tasks",
        All(tuple((f"a: P_first - P_{b + 1} > 0", Contrast(
            ((Block(0, True), 1.0), (Block(b, True), -1.0)), bonferroni=3))
            for b in (1, 2, 3))),
        "P_first - P_b for each other block b, paired by seed, Bonferroni over 3",
        tasks=("qnli",), only_tasks=True, figure="localized",
        caveat="part (b), N_first of QNLI above SST-2's and CoLA's, is not evaluated"),
    Claim(
        "003-C11", "003", "P2", "the middle layers matter for SST-2 (and CoLA)",
        "003 §4; Fig. 2 caption",
        "SST-2 appears to be particularly damaged by the removal of middle layers",
        MiddleShares((("a: N_mid(SST-2) > N_mid(QNLI)", "N", "sst2", "qnli"),
                      ("b: S_mid(SST-2) > S_mid(QNLI)", "S", "sst2", "qnli"),
                      ("b: S_mid(CoLA) > S_mid(QNLI)", "S", "cola", "qnli"))),
        "differences across tasks of the middle blocks' normalized loss (N) and gain (S), "
        "seed bootstrap", tasks=TASKS_003, figure="localized",
        caveat="the within-task reading of 'particularly' (SST-2's largest N is a middle "
               "block) is not evaluated"),
    Claim(
        "003-C12", "003", "P2", "which layers help most depends on the task",
        "003 §1 finding 3; §4; Fig. 2",
        "The layers most beneficial to finetuning differ by task",
        BlockProfiles(), "task x block interaction of z = (s - E)/(F - E), two-way ANOVA "
        "(type II) for kept-only and reinitialized blocks, Holm over 2",
        tasks=TASKS_003, figure="localized",
        caveat="contradicted on the interaction effects' point estimates (all within 0.1), "
               "not on their intervals; F and E are taken as known in z"),
    Claim(
        "003-C13", "003", "P1", "shuffling the layer order lowers accuracy",
        "003 §1 finding 4; §5; Fig. 3",
        "Reordering the pretrained BERT layers prior to finetuning significantly decreases "
        "downstream accuracy",
        Contrast(((F, 1.0), (Permuted(), -1.0))),
        "s(original order) - mean over permutations, Welch (units: permutations)",
        tasks=TASKS_003, figure="permutations",
        caveat="the identity permutation is left out (it is the original order)"),
    Claim(
        "003-C14", "003", "P1", "a shuffled model is not much above the embeddings-only model",
        "003 §5; Fig. 3",
        "scrambling BERT's layers reduces their finetuning ability to not much above a "
        "randomly-initialized network",
        Contrast(((Permuted(), 1.0), (E, -0.5), (F, -0.5)), rule=LESS, needs_gain=True,
                 share=(((Permuted(), 1.0), (E, -1.0)), GAIN)),
        "c = s(perm) - (s(0) + s(L))/2 (< 0 iff R_perm < 0.5); share R_perm",
        tasks=TASKS_003, figure="permutations",
        caveat="the 0.5 threshold is claims.md's; the 'randomly initialized' model keeps "
               "its pretrained embeddings"),
    Claim(
        "003-C15", "003", "P1", "a permutation has similar effects on different tasks",
        "003 Table 1; §5",
        "Specific permutations of layers have similar impacts on finetuning across tasks.",
        TaskCorrelation(published=(
            ("sst2", "qnli", "spearman", 0.72), ("sst2", "qnli", "pearson", 0.46),
            ("sst2", "cola", "spearman", 0.74), ("sst2", "cola", "pearson", 0.77),
            ("qnli", "cola", "spearman", 0.83), ("qnli", "cola", "pearson", 0.68))),
        "correlation over permutations of the two tasks' mean scores (Fisher z CI)",
        tasks=TASKS_003, figure="permutations", published="Table 1 (N = 10)",
        caveat="our protocol (seed = n) also changes the subset per run, which weakens "
               "correlations; --protocol authors fixes it"),
    Claim(
        "003-C17", "003", "P2", "reinitializing any single layer has little effect",
        "003 App. C; Fig. 5",
        "we observe little effect on finetuning metrics from reinitializing each layer",
        EveryLayer(0.1, skip=(("cola", 1),)),
        "max over layers l of F - s(l) - 0.1 (F - E), Bonferroni",
        tasks=TASKS_003, figure="single_layer",
        caveat="CoLA layer 1 is the paper's own exception (003-C18)"),
    Claim(
        "003-C18", "003", "P2", "reinitializing layer 1 hurts CoLA",
        "003 App. C", "(with the exception of reinitializing the first layer on CoLA "
        "performance)",
        Contrast(((F, 0.9), (Layer(1), -1.0), (E, 0.1))),
        "F - s(layer 1 reinitialized) - 0.1 (F - E), paired by seed (> 0: the drop exceeds "
        "10% of the pretraining gain)",
        tasks=("cola",), only_tasks=True, figure="single_layer",
        caveat="contradicted here when the drop is significantly below 10% of the gain "
               "(claims.md: equivalent to 0 within delta_abs)"),
    Claim(
        "003-C21", "003", "P2", "5x learning rate on reinitialized layers does not help",
        "003 App. E; Fig. 6",
        "A higher learning rate appears to increase the variance of the evaluation metrics "
        "while not improving performance.",
        Contrast(_variant(multiplier=5.0), rule=Rule("non-superiority", margin="abs")),
        "mean over k < L of s(LR x5) - s(LR x1), paired by seed",
        tasks=TASKS_003, figure="variants"),
    Claim(
        "003-C23", "003", "P2", "keeping LayerNorm of reinitialized layers does not help",
        "003 App. F; Fig. 7",
        "preserving layer norm does not aid (and may even harm) finetuning of reinitialized "
        "layers",
        Contrast(_variant(layernorm=True), rule=Rule("non-superiority", margin="abs")),
        "mean over k < L of s(LayerNorm kept) - s(LayerNorm redrawn), paired by seed",
        tasks=TASKS_003, figure="variants"),
    Claim(
        "003-C19", "003", "P2", "more epochs: no gain at 5k, several points at 500",
        "003 App. D",
        "minimal effects of training longer than three epochs for the subsamples of 5k ... "
        "improvements of several percentage points for ... five epochs",
        EpochGain(), "s(e) - s(3) inside the epochs study's runs, paired by seed: (a) above "
        "1,000 examples, s(10) - s(3) and s(5) - s(3) per k within +-delta_abs (Bonferroni); "
        "(b) at <= 1,000, the mean over k of s(5) - s(3) > 0", tasks=TASKS_003,
        figure="variants", published="several percentage points at 500 (no exact number)",
        caveat="the paper tracked validation loss, one run per setting; epoch 3 here is the "
               "10-epoch runs' own, not a 3-epoch run's (a decaying schedule differs)"),
    Claim(
        "003-C22", "003", "P2", "5x learning rate on reinitialized layers increases variance",
        "003 App. E; Fig. 6",
        "A higher learning rate appears to increase the variance of the evaluation metrics",
        SpreadRatio(), "sigma(LR x5) / sigma(LR x1), pooled over the cells k < L (F interval)",
        tasks=TASKS_003, figure="variants"),
    Claim(
        "000-C2", "000", "P2", "SST-2: 1% of the data with pretrained layers beats all-reinit "
        "with 100x the data", "000 §6.1.1",
        "higher than that of a fully supervised model trained on 10 or 100 times the training "
        "data",
        AcrossSizes((("a: s(L, small) - s(0, large) > 0", lambda n: ((Kept(n), 1.0),),
                      lambda n: ((E, -1.0),)),
                     ("b: s(L-2, small) - s(0, large) > 0", lambda n: ((Kept(n - 2), 1.0),),
                      lambda n: ((E, -1.0),)))),
        "no or partial reinit of the top two layers at the small size minus all reinit at the "
        "large size, Welch", tasks=("sst2",), only_tasks=True,
        caveat="000's sizes are 1% and 100% of SST-2; any two sizes at least 10x apart stand "
               "in, labelled; the 10% size is not evaluated"),
    Claim(
        "000-C3", "000", "P2", "SST-2: with less data the progressive curve is less concave",
        "000 §6.1.1",
        "The loss in accuracy with increasing partial re-initialization becomes less concave "
        "as training data size decreases.",
        CurveArea(), "AUC(large) - AUC(small) of G(k) over k/L, seed bootstrap",
        tasks=("sst2",), only_tasks=True,
        caveat="the middle-third share MC, the secondary statistic, is not evaluated; the "
               "same finding as 003-C2 in another form"),
    Claim(
        "000-C4", "000", "P2", "QNLI: the middle layers add little, and QNLI is more concave "
        "than SST-2", "000 §6.1.2; §6.2",
        "For all the training data fractions, the contribution of pre-trained information from "
        "the middle layers is fairly low",
        FlatMiddle(), "(a) MC(QNLI) = G(2L/3) - G(L/3) < 1/3 and (b) AUC(QNLI) - AUC(SST-2) > "
        "0, seed bootstrap, at each size", tasks=("qnli", "sst2"), only_tasks=True,
        caveat="one verdict per size; 'every size' (Bonferroni over sizes) is read from the "
               "rows; the straight-line reference 1/3 is claims.md's"),
    Claim(
        "000-C5", "000", "P2", "QNLI: as data shrinks, more bottom layers are needed",
        "000 §6.1.2",
        "as training data size decreases, the pre-trained information from more and more "
        "earlier layers becomes important",
        KneeShift(), "P(k*_0.8 at the small size > k*_0.8 at the large size), k*: the fewest "
        "layers kept whose normalized curve reaches 0.8 (seed bootstrap)",
        tasks=("qnli",), only_tasks=True,
        published="3 layers (100%), 4 (10%), 5 (1%) of 12",
        caveat="the paper's knee is read by eye; tau = 0.8 is claims.md's"),
    Claim(
        "000-C7", "000", "P2", "~670 examples: the middle layers are worth ~5 points on SST-2 "
        "(part a)", "000 §6.1.3",
        "For SST-2, we see that reinitializing the middle layers also leads to considerable "
        "drops in accuracy, by about 5% points.",
        Contrast(lambda n: ((Kept(round(2 * n / 3)), 1.0), (Kept(round(n / 3)), -1.0))),
        "s(2L/3) - s(L/3), paired by seed (the middle third of the layers kept or not)",
        sizes="scarce", tasks=("sst2",), only_tasks=True, published="about 5 points",
        published_value=0.05,
        caveat="parts (b) QNLI near 0 and (c) the middle share larger on SST-2 are not "
               "evaluated"),
    Claim(
        "004-C1", "004", "P1", "early-layer gain large with plentiful data, small when scarce",
        "004 Abstract (v2); v2 Fig. 2",
        "parameters that provide tremendous performance improvement when data is plentiful "
        "may provide negligible benefits in data-scarce settings",
        SizeContrast(EARLY_GAIN, rule=LESS), "A(small) - A(large), A(n) = s(q) - s(0), Welch",
        tasks=TASKS_003, uses_q=True,
        caveat="part (b), A(500) equivalent to 0, is not evaluated; (a) carries the verdict"),
    Claim(
        "004-C2", "004", "P2", "probing does not predict transfer when data is plentiful",
        "004 TL;DR; v2 Fig. 2 caption",
        "Probing results do not reliably predict transfer performance in data-rich settings",
        CurveGap(), "D = mean over k of |G(k) - P(k)|, the normalized progressive and probe "
        "curves (bootstrap over both kinds of seeds)",
        sizes="plentiful", tasks=TASKS_003,
        caveat="D's definition (mean absolute gap, min-max normalized probes) is ours; the "
               "'align under scarcity' half is 003-C8, not evaluated"),
    Claim(
        "000-C1", "000", "P2", "the total gain from pretraining is larger with less data",
        "000 Abstract; §6.1; Conclusion",
        "when there is less training data, there is more reliance on pre-trained weights",
        SizeContrast(GAIN), "T(small) - T(large), T(n) = s(L) - s(0), Welch",
        tasks=("sst2", "qnli"),
        caveat="with epochs fixed, small-n runs take fewer optimizer steps"),
    Claim(
        "000-C8", "000", "P2", "CoLA: a roughly linear drop; early and middle layers equal",
        "000 §6.1.4",
        "a fairly linear drop in performance with increasing partial reinitialization; middle "
        "and earlier layers seems to contribute equally",
        LinearDrop(), "(a) AUC - 0.5 and (b) G(L/3) - (G(2L/3) - G(L/3)), each within 0.1 "
        "(seed bootstrap)", tasks=("cola",), only_tasks=True,
        caveat="contradicts 001-C8 (flat until layer 10); the margin 0.1 is claims.md's"),
    Claim(
        "000-C9", "000", "P2", "probing peaks lower and needs more layers than partial reinit",
        "000 §6.2; Conclusion",
        "Probing reaches a lower peak accuracy than partial re-initialization; in probing the "
        "model needs more layers to enable a considerable improvement in performance",
        WithProbes((("a: s(L) - best probe > 0", BestProbeBelowFinetuning()),
                    ("b: P(k50_probe > k50_ft)", ProbesNeedMoreLayers()))),
        "(a) the full finetuned model minus the best probe (Welch); (b) the bootstrap "
        "probability that the normalized probe curve reaches 0.5 at a later depth",
        tasks=("sst2", "qnli"),
        caveat="(a) is almost guaranteed; (b) is the claim. 000 probes a truncated model, "
               "003's probes (these) each hidden state"),
    Claim(
        "000-C10", "000", "P2", "the top two layers hurt probing, not partial reinit",
        "000 §6.2",
        "the highest two layers hurt the performance in both SST-2 and QNLI, while in the "
        "re-initialization method they just have a negligible effect",
        WithProbes((
            ("a: p(L-2) - (p(L-1) + p(L))/2 > 0", ProbeContrast(Contrast(lambda n: (
                (Probe(n - 2), 1.0), (Probe(n - 1), -0.5), (Probe(n), -0.5))))),
            ("b: |s(L) - s(L-2)| <= delta_abs", Contrast(
                lambda n: ((Kept(n), 1.0), (Kept(n - 2), -1.0)),
                rule=Rule("equivalence", margin="abs"))))),
        "(a) paired by probe seed; (b) equivalence of the progressive k = L and L-2 within "
        "delta_abs, paired by seed", tasks=("sst2", "qnli"),
        caveat="where the probe peaks depends on the probe (pooling, lr); tension with "
               "003-C6(a)"),
    Claim(
        "000-C13", "000", "P1", "higher layers' weights change more during finetuning",
        "000 Abstract; §6.3; Conclusion",
        "the curves are upward trending, indicating that higher layers experience a bigger "
        "change compared to lower layers",
        SeedValue("rho_w_output", "000-distance"),
        "Spearman rho of layer l and ||W_l(FT) - W_l(pretrained)||_2 of output.dense within "
        "each finetuned model, mean over seeds (seed bootstrap CI)",
        tasks=("sst2", "qnli"), figure="000-distance", overall="all",
        caveat="000's code uses the spectral norm of output.dense; the Frobenius form is "
               "stored too (rho_w_output_fro)"),
    Claim(
        "000-C14", "000", "P2", "weights change more with more data",
        "000 Abstract; §6.3",
        "We notice parallel upward shifts with increased data size.",
        LayerShift(), "mean over layers l of log(d_l(large) / d_l(small)), d_l the mean over "
        "seeds of ||W_l(FT) - W_l(pretrained)||_2 of output.dense (seed bootstrap inside "
        "each size)", tasks=("sst2", "qnli"), figure="000-distance",
        caveat="at a fixed number of epochs more data means more optimizer steps, which "
               "alone predicts the shift; the per-layer Holm tests are not evaluated, the "
               "reason counts the layers that shift up"),
    Claim(
        "001-C4", "001", "P2", "the progressive curve is neither monotone nor evenly spaced",
        "001 Abstract; §6.2",
        "the change in performance does not monotonically decrease when reinitializing the "
        "next upstream layer, nor is the change in performance constant",
        UnevenSteps(), "(a) per-seed steps s(k+1) - s(k) < 0, one-sided paired t, Holm; (b) "
        "one-way ANOVA of the steps across k", tasks=("rte", "squad_v2", "stsb", "cola",
                                                     "mrpc"),
        caveat="single runs cannot tell a reversal from noise; 001 put SQuAD's dip down to "
               "noise"),
    Claim(
        "001-C8", "001", "P2", "CoLA: flat at chance until 10 layers, then a jump",
        "001 §6.2",
        "performance is flat until adding back layer 10, where it jumps to 0.6; layers 1 "
        "through 8 do not encode important information for the task",
        All((("a: s(k) within 0.05 of chance for k <= 9 of 12", AtChance(
                upto=9, margin=0.05, contradicts=False)),
             ("b: s(10) - s(9) - 0.5 (F - E) > 0", Jump(9, 10)),
             ("c: 0.9F - R_first + 0.1E < 0", Contrast(
                 ((F, 0.9), (Block(0, False), -1.0), (E, 0.1)), rule=LESS)),
             ("c: 0.9F - R_second + 0.1E < 0", Contrast(
                 ((F, 0.9), (Block(1, False), -1.0), (E, 0.1)), rule=LESS)))),
        "(a) equivalence to chance, Bonferroni; (b) the jump as a share of the gain; (c) "
        "reinitializing block 1 or 2 alone loses less than 10% of the gain (localized)",
        tasks=("cola",), only_tasks=True,
        published="MCC 0.6 at k = 10 (above 001's own full model, 0.526)",
        caveat="on a 6-layer model 9 and 10 of 12 map onto one layer: (b) needs a deeper "
               "model; (a) alone never contradicts (claims.md); contradicts 000-C8, 003-C18"),
    Claim(
        "001-C9", "001", "P2", "MRPC: reinitializing any suffix gives the majority predictor",
        "001 §5.6 table", "the performance does not change with reinitializing different "
        "layers",
        AtChance(), "s(k) - the majority-class score for each k < L, equivalence within "
        "delta_abs, Bonferroni", tasks=("mrpc",), only_tasks=True,
        published="0.748 (mean of accuracy 0.683 and F1 0.812) for any k < 12: the score of "
                  "predicting the majority dev class",
        caveat="001's numbers are a collapsed optimization; s(L) - s(L-1) > 0 is not "
               "evaluated"),
    Claim(
        "001-C11", "001", "P2", "one head of layer 1 or 2 reinitialized lowers the score",
        "001 §6.3; Figs 7-8",
        "If we reinitialize any attention head in layers 1 or 2, the performance, up to the "
        "75th percentile, will decrease.",
        All(tuple((f"layer {layer}: mean over its heads - F < 0", Contrast(
            ((Heads((layer,)), 1.0), (F, -1.0)), rule=LESS)) for layer in (1, 2))),
        "per seed, the mean over the layer's heads (each reinitialized alone) minus the full "
        "model, paired by seed; both layers", tasks=("cola", "stsb"), figure="heads",
        published="CoLA -0.008 / -0.021, STS-B -0.003 / -0.004 (layers 1 / 2; one run)",
        caveat="the 75th percentile over heads is not evaluated; effects of 0.003-0.02 are at "
               "the noise of one seed, so pairing by seed matters"),
    Claim(
        "001-C12", "001", "P2", "one head of layer L-1 or L reinitialized raises the score",
        "001 §6.3; Conclusion",
        "reinitializing any attention head in the downstream layers improves the model "
        "performance",
        All(tuple((f"layer {name}: mean over its heads - F > 0", Contrast(
            ((Heads((layer,)), 1.0), (F, -1.0)))) for layer, name in ((-1, "L-1"), (0, "L")))),
        "per seed, the mean over the layer's heads minus the full model, paired by seed; "
        "both layers", tasks=("cola", "stsb"), figure="heads",
        published="CoLA +0.006 / +0.003, STS-B +0.0003 / +0.0009 (layers 11 / 12; one run)",
        caveat="'any' is contradicted by 001's own tables; the mean is tested"),
    Claim(
        "001-C13", "001", "P2", "upstream heads matter more than downstream heads",
        "001 §4.3.2; §6.3",
        "We expect that reinitializing attention heads in downstream layers will cause a "
        "smaller decline in performance compared to reinitializing attention heads in "
        "upstream layers.",
        Contrast(((Heads((1, 2)), 1.0), (Heads((-1, 0)), -1.0)), rule=LESS),
        "mean head effect of layers 1-2 minus that of layers L-1..L, paired by seed",
        tasks=("cola", "stsb"), figure="heads",
        published="CoLA -0.0149 vs +0.0048, STS-B -0.0034 vs +0.0006 (001 Figs 5-6)"),
    Claim(
        "002-C1", "002", "P1", "finetuning changes attention mostly in the last layers",
        "002 Abstract; §3; Fig. 1; §7",
        "the attention mode in low layers and intermediate layers do not change seriously, "
        "while the attention mode of last layers changes drastically",
        All((("Q > 2", SeedValue("js_late", "002-dynamics", Rule("threshold", 2.0, against=1.0),
                                 over="js_early")),
             ("rho > 0", SeedValue("rho_js", "002-dynamics")))),
        "Q = mean attention JS over the late layers / over the early and middle ones (seed "
        "bootstrap); (b) Spearman rho of layer and JS",
        figure="002-dynamics",
        caveat="the factor 2 is claims.md's reading of 'drastically'"),
    Claim(
        "002-C2", "002", "P2", "representation change (SVCCA) grows with depth",
        "002 §4; Fig. 2",
        "changes in SVCCA distance in higher layers are more distinct than lower layers",
        SeedValue("rho_svcca", "002-dynamics"),
        "Spearman rho of layer l and the SVCCA distance between its pretrained and finetuned "
        "outputs within each finetuned model, mean over seeds (seed bootstrap CI)",
        figure="002-dynamics",
        caveat="the late/early ratio is not evaluated; SVCCA's settings (99% variance kept) "
               "change the levels"),
    Claim(
        "002-C5", "002", "P2", "across seeds, attention diverges only at the top; smaller "
        "data diverges earlier", "002 §5.1; Fig. 4; §1",
        "the attention mode of low and intermediate layers is basically consistent between "
        "two different random seeds, whereas ... last layers is relatively divergent",
        SeedDivergence(), "(a) per task: Q = mean JS_seed over the late layers / over the "
        "others > 1 and the mean Spearman rho(l, JS_seed) > 0; (b) the change point of MRPC "
        "before MNLI's and SST-2's; seed pairs resampled", tasks=("mnli", "sst2", "mrpc"),
        figure="002-dynamics", published="figure only; MRPC diverges at 'the 9th layer' of 24",
        caveat="the pairs come from `reinit-tune consistency`; the tasks differ in size and in "
               "hyperparameters (002 Table 1), so (b)'s data-size reading is claims.md's"),
    Claim(
        "002-C7", "002", "P2", "across tasks, low layers agree; upper layers diverge more for "
        "less similar tasks", "002 §5.2; Figs 6-7; §1",
        "no matter two datasets are from the same domain or the different domain, ... low "
        "layers (0-7 layer) are consistent",
        TaskDivergence(), "(a) per pair of tasks: D_task / D_seed over the lowest third of "
        "the layers <= 1.5 for JS and SVCCA; (b) late-layer JS RTE-MNLI < MRPC-RTE < "
        "MRPC-SST-2, Holm; pairs resampled", tasks=("mnli", "rte", "mrpc", "sst2"),
        figure="002-dynamics",
        caveat="(b) needs the four tasks named; the examples each pair is compared on (200 of "
               "each task by default) change the levels"),
    Claim(
        "002-C4", "002", "P2", "reverting a low layer barely changes the final representation",
        "002 §4; Fig. 3",
        "whether the low layers (0-10) are replaced with their original values or not, it has "
        "little effect on the final output representation",
        All((("a: max D_rep over low layers / max D_rep <= 0.1", SeedValue(
                "rep_low_share", "002-dynamics", Rule("non-superiority", 0.1))),
             ("b: rho(l, D_rep) > 0", SeedValue("rho_rep", "002-dynamics")),
             ("b: mean D_rep upper - low > 0", SeedValue("rep_gap", "002-dynamics")))),
        "per finetuned model: D_rep(l), the last layer's SVCCA distance with layer l reverted; "
        "(a) its low-layer maximum as a share of its maximum, (b) its rank correlation with l "
        "and its upper-minus-low mean; means over seeds (seed bootstrap)",
        figure="002-dynamics",
        caveat="low layers: depth <= 0.45 (002's 0-10 of 24); 002 places them differently "
               "elsewhere"),
    Claim(
        "001-C1", "001", "P2", "WNLI as an intermediate task helps CoLA and MRPC, not RTE",
        "001 §6.1; Fig. 2 table; Conclusion",
        "using WNLI as an intermediate task and each of the other tasks as the final task "
        "outperforms the baseline ... only final task ... is RTE",
        ByTask((("cola", Contrast(((After("wnli"), 1.0), (F, -1.0)))),
                ("mrpc", Contrast(((After("wnli"), 1.0), (F, -1.0)))),
                ("rte", Contrast(((After("wnli"), 1.0), (F, -1.0)), rule=LESS)))),
        "s(WNLI then T) - s(T directly), paired by the final stage's seed: > 0 for CoLA and "
        "MRPC, < 0 for RTE", tasks=("cola", "mrpc", "rte"), only_tasks=True,
        figure="sequential",
        published="CoLA 0.536 vs 0.526, MRPC 0.786 vs 0.776, RTE 0.588 vs 0.635 (best of two "
                  "runs)",
        caveat="the overall verdict across the three tasks takes the majority rule, not "
               "claims.md's Holm-corrected conjunction; 001 kept the best of two runs"),
    Claim(
        "001-C3", "001", "P2", "downstream reinit costs less than upstream reinit",
        "001 Abstract; §6.2", "reinitializing downstream layers causes a smaller decrease in "
        "performance than reinitializing upstream layers",
        Trend(), "Spearman rho of k and s(k) over k = 0..L (seed bootstrap CI)",
        tasks=("rte", "squad_v2", "stsb", "cola", "mrpc")),
)

BY_ID = {c.id: c for c in CLAIMS}
