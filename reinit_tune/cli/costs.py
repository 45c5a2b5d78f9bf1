"""What a suggested sweep command would cost: each is planned as its ``--dry-run`` plans it
(the trials the store lacks, the device-hours the cost table gives them), for the commands
``verdicts`` prints and the report shows."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import shlex
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reinit_tune.verdicts.engine import VerdictRow


def priced(rows: Sequence[VerdictRow], commands: Iterable[str]) -> list[VerdictRow]:
    """``rows`` with the cost of those of ``commands`` they print (``command_costs``)."""
    costs = command_costs(commands)
    return [dataclasses.replace(r, cost=costs[r.command]) if r.command in costs else r
            for r in rows]


COSTED = 40  # commands whose cost is planned; the rest print without one


def command_costs(commands: Iterable[str]) -> dict[str, str]:
    """What each distinct command of ``commands`` would add, as its dry run plans it: "12
    trials, about 0.05 device-hours on ..." (or why that is not known here); the first
    ``COSTED`` of them."""
    from reinit_tune import families
    from reinit_tune.cli.sweep import configs_of, run_options, sweep_parser
    from reinit_tune.errors import InputError, ReinitTuneError
    from reinit_tune.model.shape import shape_for
    from reinit_tune.sweep import cluster
    from reinit_tune.sweep.options import AUTO_GPUS
    from reinit_tune.sweep.runner import Sweep

    found: dict[str, str] = {}
    devices = None  # where ``auto`` GPUs resolve: asked once, not once a command
    unanswered = None  # why asking failed (a cluster that did not answer): not asked again
    quiet = logging.getLogger("reinit_tune")
    level, quiet.level = quiet.level, logging.ERROR  # the plan's warnings are the sweep's
    try:
        # each is a dry run's planning (~0.3 s): a store of 10^4 groups prints thousands
        for command in list(dict.fromkeys(commands))[:COSTED]:
            try:
                words = shlex.split(command)
                family = families.get(words[2])
                refused = io.StringIO()  # argparse's own message: one line of ours instead
                with contextlib.redirect_stderr(refused):
                    try:
                        args = sweep_parser(family).parse_args(words[3:])
                    except SystemExit:
                        raise InputError(refused.getvalue().strip().splitlines()[-1]
                                         if refused.getvalue().strip() else "bad flags") from None
                model = args.model or family.model
                if args.gpus_per_trial == AUTO_GPUS:  # as the command would resolve it
                    if unanswered is not None:
                        raise unanswered
                    try:
                        devices = devices or cluster.resolve_gpus(AUTO_GPUS)
                    except ReinitTuneError as e:
                        unanswered = e
                        raise
                    args.gpus_per_trial = devices.gpus_per_trial
                estimate, most = Sweep(configs_of(args, family), run_options(args, family),
                                       shapes={model: shape_for(model, args.num_layers,
                                                                args.num_heads)}).cost()
            except (ReinitTuneError, SystemExit, OSError, ValueError) as e:
                why = " ".join(line.strip(" -") for line in str(e).splitlines()[:2])
                found[command] = "cost not known here" + (
                    f" (its dry run says: {why})" if why else "")
                continue
            if isinstance(estimate, str):
                found[command] = estimate.removeprefix("estimated cost: ")
            elif estimate is None or not estimate.trials:
                found[command] = ("adds nothing: the store has these trials" if most is None
                                  else f"adds up to {most} trials (seeds on demand: as many "
                                  "as the interval needs)")
            else:
                unit = "GPU-hours" if estimate.packs else "device-hours"
                hours = f"about {estimate.device_hours:.2g} {unit}"
                found[command] = (
                    f"adds {estimate.trials} to {most} trials (seeds on demand), {hours} for "
                    f"the first {estimate.trials}" if most and most > estimate.trials
                    else f"adds {estimate.trials} trials, {hours}") + f" on {estimate.device}"
    finally:
        quiet.setLevel(level)
    return found
