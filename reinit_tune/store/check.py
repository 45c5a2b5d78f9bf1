"""Checking a store: the files every reader skips (unreadable, another program's), the rows
it skips as malformed, trials stored "ok" whose epoch rows are lost or missing, and trials
stored ok with different scores in two files; ``reinit-tune store check`` prints what
``check_store`` finds."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from reinit_tune.metrics import metric_range
from reinit_tune.store.files import Vanished, damaged_files, key_count, listing
from reinit_tune.store.lookup import finished_rows
from reinit_tune.store.reader import Problems, connect, read_table, schema_groups, usable
from reinit_tune.store.schema import EPOCHS, TRIALS
from reinit_tune.store.tables import TABLES, TRIAL_TABLE, load_trials
from reinit_tune.wording import counted


@dataclasses.dataclass
class StoreCheck:
    """What ``check_store`` found: files no reader can use, rows skipped as malformed,
    trials stored "ok" whose epoch rows are unreadable (the next sweep reruns them), and
    how many per-trial and compacted files each table has."""

    unreadable: list[Path]
    foreign: list[Path]
    malformed: list[tuple[Path, str, str]]
    lost_epochs: list[str]
    files: dict[str, tuple[int, int]]
    # files whose page checksums fail (a flipped byte): path -> why
    damaged: dict[Path, str] = dataclasses.field(default_factory=dict)
    # files in a table's folder that no reader opens (not Parquet): said, not a problem
    ignored: list[Path] = dataclasses.field(default_factory=list)
    # ok rows whose score their metric cannot take (``bad_scores``), where there are some
    scores: str | None = None
    # per-trial files not named by the trial they hold (copies): every reader skips them
    strays: list[Path] = dataclasses.field(default_factory=list)
    # trials stored ok after training epochs whose epoch rows are not in the store at all
    # (their file deleted or never synced): the epoch figures and verdicts lack them
    missing_epochs: list[str] = dataclasses.field(default_factory=list)
    # trials stored ok with different scores in two or more files (a compacted file restored
    # from a backup, two stores copied into one): the kept row and the others, per trial
    disagreeing: list[Disagreement] = dataclasses.field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.unreadable or self.foreign or self.malformed or self.lost_epochs
                    or self.damaged or self.scores or self.strays or self.missing_epochs
                    or self.disagreeing)

    def __str__(self) -> str:
        lines = [self.scores] if self.scores else []
        lines += [f"damaged file (its checksums fail: values in it may read wrong; `reinit-tune "
                 f"sweep ... --rerun-damaged` moves it aside and trains its trials again): {p} "
                 f"({why})" for p, why in self.damaged.items()]
        lines += [f"unreadable file (restore it, or `reinit-tune sweep ... --rerun-damaged` "
                  f"moves it aside and trains its trials again): {p} ({_held(p)})"
                  for p in self.unreadable]
        lines += [f"{name}: {small} per-trial files, {compacted} compacted"
                  for name, (small, compacted) in self.files.items() if small or compacted]
        lines += [f"not a reinit-tune file (move it elsewhere): {p}" for p in self.foreign]
        lines += _few([f"stray copy, not named by the trial it holds (a sync conflict or a "
                       f"backup; every reader skips it: delete or move it): {p}"
                       for p in self.strays], "stray copies")
        lines += _few([f"ignored by every reader (not a Parquet file): {p}"
                       for p in self.ignored], "ignored files")
        lines += _few([f"malformed row {key} in {p}: {why}" for p, key, why in self.malformed],
                      "malformed rows")
        lines += _few([f"trial {t} is stored ok but its epoch rows are unreadable: its sweep "
                       "trains it again (with --rerun-damaged where the file is damaged)"
                       for t in self.lost_epochs],
                      "trials whose epoch rows are unreadable")
        lines += _few([f"trial {t} is stored ok after training, but the store has no epoch "
                       f"rows of it (its file {EPOCHS}/{t}.parquet was deleted or never "
                       "synced): restore the file; until then the epoch figures and "
                       "verdicts leave it out"
                       for t in self.missing_epochs], "trials without epoch rows")
        lines += _few([str(d) for d in self.disagreeing], "trials whose ok rows disagree")
        lines.append("store is clean" if self.clean else "store has problems (above)")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class Disagreement:
    """A trial stored ok with different scores in several files: ``rows`` are (file,
    score) in the readers' precedence, the first the row every reader takes."""

    trial_id: str
    rows: tuple[tuple[str, float], ...]

    def __str__(self) -> str:
        (kept, score), others = self.rows[0], self.rows[1:]
        return (f"trial {self.trial_id} is stored ok with different scores: {score:.6g} in "
                f"{Path(kept).name} (what every reader takes), "
                + ", ".join(f"{s:.6g} in {Path(p).name}" for p, s in others)
                + " (a compacted file restored from a backup, or two stores copied into "
                "one? keep the file of the run you mean and move the other away)")


def disagreeing(results_dir: str | os.PathLike) -> list[Disagreement]:
    """The trials stored ok with different scores in two or more files of the trials
    table, in the readers' precedence (per-trial file, then compacted files newest
    first). A row superseded by another status (an error then a rerun) is no
    disagreement: the readers' rule decides it, and that is the store's history."""
    folder = Path(results_dir) / TRIALS
    small, compacted = listing(folder)
    rank = {p: i for i, p in enumerate([*small, *reversed(compacted)])}
    where: dict[str, list[str]] = {}
    for path in small:  # a per-trial file holds the trial it is named by (strays aside)
        where.setdefault(Path(path).stem, []).append(path)
    for path in reversed(compacted):
        with contextlib.suppress(OSError, pa.ArrowException):
            for key in pq.read_table(path, columns=["trial_id"])["trial_id"].to_pylist():
                where.setdefault(key, []).append(path)
    shared = {k: paths for k, paths in where.items() if len(paths) > 1}
    if not shared:
        return []
    scores: dict[tuple[str, str], float] = {}
    for path in dict.fromkeys(p for paths in shared.values() for p in paths):
        wanted = [k for k, paths in shared.items() if path in paths]
        with contextlib.suppress(OSError, pa.ArrowException, KeyError):
            rows = pq.read_table(path, columns=["trial_id", "status", "score"],
                                 filters=[("trial_id", "in", wanted)]).to_pylist()
            for row in rows:
                if row["status"] == "ok" and row["score"] is not None:
                    scores[path, row["trial_id"]] = float(row["score"])
    out = []
    for key, paths in sorted(shared.items()):
        rows = tuple((p, scores[p, key]) for p in sorted(paths, key=rank.__getitem__)
                     if (p, key) in scores)
        if len({round(s, 12) for _, s in rows}) > 1:
            out.append(Disagreement(key, rows))
    return out


def _held(path: Path) -> str:
    held = key_count(path)
    return "trials unknown" if held is None else counted(held, "trial")


def _few(lines: list[str], what: str, shown: int = 5) -> list[str]:
    """At most ``shown`` of ``lines`` and a count of the rest: one fault, not a page each."""
    if len(lines) <= shown:
        return lines
    return [*lines[:shown], f"... and {len(lines) - shown} more {what}"]


def check_store(results_dir: str | os.PathLike) -> StoreCheck:
    """Read every table of the store as the readers do and report what they skip."""
    root = Path(results_dir)
    problems = Problems()
    files = {}
    ignored = []
    keys = {}
    for name, table in TABLES.items():
        small, compacted = listing(root / name)
        files[name] = (len(small), len(compacted))
        keys[name] = read_table(root, table, [table.key], problems)[table.key].to_pylist()
        if (root / name).is_dir():  # temporary files of a writer start with "."
            ignored += sorted(p for p in (root / name).iterdir()
                              if p.suffix != ".parquet" and not p.name.startswith("."))
    ok = load_trials(root, status="ok",
                     columns=["trial_id", "metric", "score", "epochs_completed"])
    finished = set(finished_rows(root)["trial_id"])
    lost = set(ok["trial_id"]) - finished
    # every trial that trained an epoch wrote (or, reused, copied) its epoch rows
    trained = ok.loc[ok["epochs_completed"].fillna(0).gt(0), "trial_id"]
    # of the trials whose rows were read before the epochs (TABLES' order): a writer stores
    # a trial's epochs before its row, so one written meanwhile is not taken for a loss
    missing = sorted((set(trained) & set(keys[TRIALS])) - set(keys[EPOCHS]) - lost)
    return StoreCheck(problems.unreadable, problems.foreign, problems.malformed,
                      sorted(lost), files, damaged_files(root),
                      ignored, bad_scores(ok), sorted(set(problems.strays)), missing,
                      disagreeing(root))


def _footers(results_dir: str | os.PathLike, tables: tuple[str, ...]) -> Problems:
    """The files of ``tables`` without a readable footer, and another program's files: one
    pass over the footers (``check_store`` reads rows too)."""
    problems = Problems()
    con = connect()
    for name in tables:
        table = TABLES[name]
        small, compacted = listing(Path(results_dir) / name)
        files = small + compacted
        if not files:
            continue
        found = Problems()
        with contextlib.suppress(Vanished):
            for group in schema_groups(con, files, found):
                if not usable(pq.read_schema(group[0]), table.key, name):
                    found.foreign += [Path(f) for f in group]
        problems.add(found)
    return problems


def unreadable_files(results_dir: str | os.PathLike) -> list[Path]:
    """Store files that cannot be read (a disk fault, a foreign file): what ``load_trials``
    and the other readers skip."""
    return sorted(_footers(results_dir, tuple(TABLES)).bad_files)


# why a file without a readable footer fails, for ``broken_files``
NO_FOOTER = "no readable Parquet footer (cut short, or not a Parquet file)"


def broken_files(results_dir: str | os.PathLike,
                 tables: tuple[str, ...] = (TRIALS, EPOCHS)) -> dict[Path, str]:
    """Files of ``tables`` whose rows are lost or may read wrong, and why: those whose
    checksums fail (``damaged_files``) and those without a readable footer. Another
    program's Parquet files are not among them: nothing of ours was in them."""
    found = damaged_files(results_dir, tables)
    for path in _footers(results_dir, tables).unreadable:
        found.setdefault(path, NO_FOOTER)
    return dict(sorted(found.items()))


def malformed_rows(results_dir: str | os.PathLike) -> list[tuple[Path, str, str]]:
    """Trial rows every reader skips as malformed: (file, trial id, why). Reads only the
    columns the checks need (``reader``'s malformed-row checks)."""
    problems = Problems()
    read_table(results_dir, TRIAL_TABLE, ["trial_id"], problems)
    return problems.malformed


SHOWN = 5  # trials named per message; the rest are counted


def bad_scores(trials: pd.DataFrame) -> str | None:
    """Why the ok runs of ``trials`` cannot be decided on (scores that are not finite, or
    outside their metric's range, naming the trials), or None."""
    ok = trials[trials["status"] == "ok"] if "status" in trials else trials
    if ok.empty:
        return None
    score = pd.to_numeric(ok["score"], errors="coerce").to_numpy(np.float64)
    low = np.empty(len(ok))
    high = np.empty(len(ok))
    for metric, where in ok.groupby(ok["metric"].astype(str), sort=False).indices.items():
        low[where], high[where] = metric_range(metric)
    bad = ~np.isfinite(score) | (score < low) | (score > high)
    if not bad.any():
        return None
    rows = ok[bad]
    named = ", ".join(f"{t} ({m} {s})" for t, m, s in
                      zip(rows["trial_id"][:SHOWN], rows["metric"][:SHOWN],
                          rows["score"][:SHOWN], strict=True))
    more = f" and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
    return (f"{len(rows)} ok run(s) hold a score their metric cannot take (not finite, or "
            f"outside [0, 1], [-1, 1] for mcc and correlations): {named}{more}; remove their "
            "files from trials/ and rerun their sweep (it trains what the store lacks)")
