"""``Claim``: one testable finding of a paper, as a declaration the engine reads
(claims.md): where it comes from, what it says, which runs and statistic decide it, and
what the paper published."""

from __future__ import annotations

from dataclasses import dataclass

from reinit_tune.verdicts.contrasts import (
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
from reinit_tune.verdicts.spreads import SpreadRatio, TaskCorrelation
from reinit_tune.verdicts.trial_values import EpochGain, LayerShift, SeedValue

Statistic = (Contrast | SizeContrast | ShareShift | EveryLayer | TaskCorrelation | All | Trend
             | SeedValue | ProbePeak | ProbeNearChance | BestProbeBelowFinetuning | ProbedBlock
             | WithProbes | SpreadRatio | ProbeContrast | ProbesNeedMoreLayers | AtChance
             | AcrossSizes | ByTask | CurveGap | CurveArea | LinearDrop
             | Jump | BlockProfiles | MiddleShares
             | KneeShift | FlatMiddle | UnevenSteps
             | CurveGapShift | LayerShift | EpochGain | SeedDivergence | TaskDivergence)

# Size classes of claims.md §0.3 (train examples): "plentiful" the largest size >= 50k,
# "scarce" <= 1k; "any" every size the store has.
SIZES = {"any": (0, float("inf")), "plentiful": (50_000, float("inf")),
         "scarce": (0, 1_000), "not scarce": (1_001, float("inf"))}


@dataclass(frozen=True)
class Claim:
    """A paper's claim. ``statistic`` decides it in each group of runs; ``sizes`` is the
    size class the paper makes it for (verdicts at other sizes are shown, labelled, and
    left out of the overall verdict); ``tasks`` the tasks it was made on, ``only_tasks``
    whether it is about those alone; ``published`` the paper's number in words and
    ``published_value`` the number compared with our interval, where there is one;
    ``estimate`` says what the estimate is; ``figure`` the family whose report section
    draws its runs; ``overall`` how the groups' verdicts combine."""

    id: str
    paper: str
    priority: str
    title: str
    source: str
    quote: str
    statistic: Statistic
    estimate: str
    sizes: str = "any"
    tasks: tuple[str, ...] = ()
    only_tasks: bool = False
    published: str = "figure only"
    published_value: float | None = None
    figure: str = "progressive"
    n_min: int = 3
    uses_q: bool = False
    caveat: str = ""
    # "tasks": one overall verdict per size across tasks (claims.md §0.5); "all": the claim
    # holds in every (task, size) group, Bonferroni over them
    overall: str = "tasks"

    def __post_init__(self) -> None:
        if self.sizes not in SIZES:
            raise ValueError(f"{self.id}: sizes {self.sizes!r}; allowed: {sorted(SIZES)}")

    def in_scope(self, examples: float) -> bool:
        low, high = SIZES[self.sizes]
        return low <= examples <= high
