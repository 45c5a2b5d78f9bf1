"""Verdicts as the command prints them (one line per verdict, then what to run) and as
JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from reinit_tune.verdicts.engine import VerdictRow


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:+.{digits}f}"


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:+.3f}, {high:+.3f}]"


def _cut(text: str, width: int) -> str:
    """``text`` in ``width`` characters, cut at a word's end with an ellipsis."""
    if len(text) <= width:
        return text
    head = text[:width - 1]
    space = head.rfind(" ")
    return (head[:space] if space > width // 2 else head).rstrip(" ,;(") + "…"


def scope(row: VerdictRow) -> str:
    parts = [row.task or "all tasks"]
    if row.train_size:
        parts.append(row.train_size)
    if row.model:
        parts.append(str(row.model).rstrip("/").split("/")[-1])
    parts += [f"{k}={v}" for k, v in row.differs.items() if k != "model"]
    return ", ".join(parts)


def text(rows: Sequence[VerdictRow]) -> str:
    """The verdict table: claim, scope, estimate (and share), 95% CI, n, verdict, published;
    below each verdict its reason, mapping and the command that would decide it."""
    lines = [f"{'claim':<8} {'verdict':<16} {'estimate':>9} {'95% CI':>20} {'n':>3}  "
             f"{'published (in CI?)':<24} scope"]
    previous = None
    for r in rows:
        if r.claim != previous and r.title:
            lines.append(f"{r.claim}: {r.title}")
        previous = r.claim
        low_n = ", low n" if r.share_method and "low n" in r.share_method else ""
        share = (f" (share {r.share:.2f} {_interval(r.share_low, r.share_high)}{low_n})"
                 if r.share is not None else "")
        inside = {True: "yes", False: "no", None: "-"}[r.published_in_ci]
        published = (f"{r.published_value:g} ({inside})" if r.published_value is not None
                     else r.published)
        lines.append(f"{r.claim:<8} {r.verdict:<16} {_number(r.estimate):>9} "
                     f"{_interval(r.ci_low, r.ci_high):>20} "
                     f"{'-' if r.n_min is None else r.n_min:>3}  {_cut(published, 24):<24} "
                     f"{scope(r)}{share}")
        if len(published) > 24:
            lines.append(f"{'':<9}published: {published}")
        if r.method:
            level = f", {r.level:.4g} interval" if r.level and r.level != 0.95 else ""
            lines.append(f"{'':<9}test: {r.method}{level}")
        for extra in (r.note, r.mapping, r.reason, *r.collapsed,
                      r.caveat and f"caveat: {r.caveat}"):
            if extra:
                lines.append(f"{'':<9}{extra}")
        if r.command:
            lines.append(f"{'':<9}run: {r.command}")
            if r.cost:
                lines.append(f"{'':<14}{r.cost}")
    counts = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    lines.append(f"{len(rows)} verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    return "\n".join(lines)


def write_json(rows: Sequence[VerdictRow], path: str | Path) -> None:
    Path(path).write_text(json.dumps([r.to_json() for r in rows], indent=1, default=str))
