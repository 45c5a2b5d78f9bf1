"""Sequential transfer (001 Exp 1, Fig. 2): finetune on an intermediate task, then on the
final task, for every (intermediate, final) pair of CoLA, MRPC, RTE and WNLI (full train
splits, 3 epochs each), plus the direct-finetune baseline, the matrix's diagonal in 001.
Each intermediate model is trained once per seed and surgery, and reused."""

from __future__ import annotations

from collections.abc import Iterable

from reinit_tune.config import TrialConfig
from reinit_tune.families.base import Family, FigureModule, FigureSpec, Flag, Grid, expand, plot
from reinit_tune.tasks import TASKS, get_task, task_name

figures = FigureModule("sequential")

SEQUENTIAL_TASKS = ("cola", "mrpc", "rte", "wnli")  # 001 Exp 1


def build(grid: Grid, *, intermediate_tasks: Iterable[str] | None = None,
          experiment: str = "sequential") -> list[TrialConfig]:
    intermediates = list(grid.tasks if intermediate_tasks is None else intermediate_tasks)
    for task in intermediates:
        get_task(task)

    def surgeries(task: str) -> list[dict]:
        return [{}, *({"intermediate_task": i} for i in intermediates if i != task)]

    return expand(grid, surgeries, experiment=experiment)


FAMILY = Family(
    name="sequential",
    title="intermediate task, then final task",
    source="001 Exp 1, Fig. 2",
    build=build,
    tasks=SEQUENTIAL_TASKS,
    sizes=(None,),
    flags=(Flag("--intermediate-tasks", "intermediate tasks, of: "
                f"{' '.join(sorted(TASKS))} (default: the --tasks)", type=task_name, nargs="+"),),
    fields="`intermediate_task`; baseline `None`",
    order=90,
    figures=(
        FigureSpec("sequential", "Sequential finetuning: intermediate x final task",
                   "001 Fig. 2, Exp. 1", "`sequential` rows (`intermediate_task`)",
                   plot("sequential", figures.plot_sequential, "trials")),
    ),
)
