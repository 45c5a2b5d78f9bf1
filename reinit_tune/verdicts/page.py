"""The report's Claims section as HTML: every verdict of the store (filterable), each
linked to the report section that draws its runs, and the papers' contradictions
(claims.md §7) side by side with what the store says of each side."""

from __future__ import annotations

import html
import math
from collections import Counter

from reinit_tune.verdicts.catalog import BY_ID
from reinit_tune.verdicts.contradictions import CONTRADICTIONS
from reinit_tune.verdicts.engine import VerdictRow
from reinit_tune.verdicts.table import scope as verdict_scope

# Rows the page lists at most (all of them go to ``reinit-tune verdicts``).
MAX_ROWS = 500
ORDER = {"supported": 0, "contradicted": 0, "inconclusive": 1}  # decided first


def _badge(verdict: str) -> str:
    return (f"<span class='v v-{verdict.split()[0]}'>{html.escape(verdict)}</span>")


def _number(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:+.{digits}f}"


def _row_html(r: VerdictRow, links: dict[str, str | None]) -> str:
    claim = BY_ID[r.claim]
    section = links.get(r.figure or "")
    link = (f"<a href='#{section}'>{html.escape(r.claim)}</a>" if section
            else html.escape(r.claim))
    low_n = ", low n" if r.share_method and "low n" in r.share_method else ""
    share = (f"<br>share {r.share:.2f} [{_number(r.share_low, 2)}, "
             f"{_number(r.share_high, 2)}]{low_n}" if r.share is not None else "")
    overall = r.task is None and r.train_size is not None  # decided from task rows
    ci = (f"[{_number(r.ci_low)}, {_number(r.ci_high)}]" if r.ci_low is not None
          else "per task" if overall else "-")
    inside = {True: "yes", False: "no", None: "-"}[r.published_in_ci]
    published = (f"{r.published_value:g} ({inside})" if r.published_value is not None
                 else html.escape(r.published))
    why = "; ".join(html.escape(x) for x in (r.note, r.mapping, r.reason, *r.collapsed,
                                             r.caveat and f"caveat: {r.caveat}") if x)
    if r.command:
        why += f"<br>run: <code>{html.escape(r.command)}</code>" + _cost(r.cost)
    estimate = _number(r.estimate) or ("per task" if overall else "-")
    tip = html.escape(f"{claim.source}: \"{claim.quote}\" Estimate: {claim.estimate}",
                      quote=True)
    return (f"<tr><td class=text title=\"{tip}\">{link}<br><small>"
            f"{html.escape(claim.title)}</small></td>"
            f"<td class=text>{_badge(r.verdict)}</td>"
            f"<td class=text>{html.escape(verdict_scope(r))}</td>"
            f"<td>{estimate}{share}</td><td>{ci}</td>"
            f"<td>{'-' if r.n_min is None else r.n_min}</td>"
            f"<td class=text>{published}</td><td class=text>{why}</td></tr>")


def _cost(cost: str | None) -> str:
    return f"<br><small class=cost>{html.escape(cost)}</small>" if cost else ""


def _family(row: VerdictRow) -> str:
    """The family whose runs a row's command trains ("other": no command)."""
    words = (row.command or "").split()
    return words[2] if len(words) > 2 and words[:2] == ["reinit-tune", "sweep"] else "other"


def _first(rows: list[VerdictRow]) -> str | None:
    """The command most of ``rows`` print (the first of them on a tie)."""
    found = Counter(r.command for r in rows if r.command).most_common(1)
    return found[0][0] if found else None


def _by_family(rows: list[VerdictRow]) -> dict[str, list[VerdictRow]]:
    """``rows`` by the family their command trains, as the page folds them."""
    by_family: dict[str, list[VerdictRow]] = {}
    for r in rows:
        by_family.setdefault(_family(r), []).append(r)
    return by_family


def _decided_first(rows: list[VerdictRow]) -> tuple[list[VerdictRow], list[VerdictRow]]:
    """The rows with a number (decided first, then inconclusive) and the "not enough data"
    rows, which the page folds per family."""
    listed = sorted((r for r in rows if r.verdict in ORDER), key=lambda r: ORDER[r.verdict])
    return listed, [r for r in rows if r.verdict not in ORDER]


def shown_commands(rows: list[VerdictRow]) -> list[str]:
    """The commands the page shows first: those of the rows it lists, then the one each
    folded family summary names (what a reader sees before opening a fold)."""
    listed, short = _decided_first(rows)
    folded = [_first(found) for found in _by_family(short).values()]
    return [c for c in [*(r.command for r in listed[:MAX_ROWS]), *folded] if c]


def _folded(rows: list[VerdictRow], links: dict[str, str | None]) -> str:
    """The "not enough data" verdicts, one folded summary per family: how many claims,
    the command most of them print, and every row inside."""
    parts = []
    for family, found in sorted(_by_family(rows).items(), key=lambda kv: -len(kv[1])):
        claims = sorted({r.claim for r in found})
        others = len({r.command for r in found if r.command}) - 1
        first = _first(found)
        cost = next((r.cost for r in found if r.command == first and r.cost), None)
        if cost and cost.startswith("cost not known here ("):  # the refusal: in the rows
            cost = "cost not known here: its dry run refuses it, the rows say why"
        run = (f" Most of them: <code>{html.escape(first)}</code>"
               + (f" ({html.escape(cost)})" if cost else "")
               + (f" ({others} other commands inside)" if others > 0 else "")
               if first else "")
        parts.append(
            f"<details class=folded><summary>not enough data, {html.escape(family)}: "
            f"{len(found)} verdicts of {len(claims)} claims ({html.escape(', '.join(claims[:8]))}"
            f"{', ...' if len(claims) > 8 else ''}).{run}</summary>"
            "<div class='table-wrap'><table><tbody>"
            + "".join(_row_html(r, links) for r in found[:MAX_ROWS])
            + "</tbody></table></div>"
            + (f"<p class=source>the first {MAX_ROWS} of {len(found)} shown; <code>"
               "reinit-tune verdicts --json FILE</code> writes them all</p>"
               if len(found) > MAX_ROWS else "") + "</details>")
    return "".join(parts)


def claims_html(rows: list[VerdictRow], links: dict[str, str | None]) -> str:
    """The report's first section: every claim's verdicts on this store (filterable), each
    linked to the figure that draws its runs, then the papers' contradictions side by side
    with what this store says of each side."""
    counts = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    head = ["claim", "verdict", "scope", "estimate", "95% CI", "n", "published (inside CI?)",
            "why, and what would decide it"]
    # decided verdicts first, then the undecided ones with a number; "not enough data"
    # folded per family below them, with the commands that would fill it
    listed, short = _decided_first(rows)
    body = [_row_html(r, links) for r in listed[:MAX_ROWS]]
    left_out = max(0, len(listed) - MAX_ROWS)
    summary = ", ".join(f"{n} {html.escape(v)}" for v, n in counts.items())
    table = ("<div class='table-wrap'><table id=\"claims-table\"><thead><tr>"
             + "".join(f"<th class=text>{h}</th>" for h in head) + "</tr></thead><tbody>"
             + "".join(body) + "</tbody></table></div>" + _folded(short, links))
    sides = []
    for c in CONTRADICTIONS:
        cells = []
        for claim_id, says in c.sides:
            found = [r for r in rows if r.claim == claim_id]
            if claim_id not in BY_ID:
                here = "not evaluated by reinit-tune yet"
            elif not found:
                here = "no verdict"
            else:
                overall = [r for r in found if r.task is None] or found
                here = "; ".join(f"{_badge(r.verdict)} ({html.escape(verdict_scope(r))})"
                                 for r in overall[:4])
            cells.append(f"<div class=side><b>{html.escape(claim_id)}</b>: "
                         f"{html.escape(says)}<br>this store: {here}</div>")
        sides.append(f"<h4>{html.escape(c.id)}: {html.escape(c.question)}</h4>"
                     f"<div class=sides>{''.join(cells)}</div>"
                     f"<p class=source>Decided by {html.escape(c.decides)}."
                     + (f" {html.escape(c.note)}." if c.note else "") + "</p>")
    return (
        "<section id='claims'><h2>Claims: do the papers' findings hold on these runs?</h2>"
        "<p class='source'>Each testable claim of the papers, decided on this store's runs "
        "(<code>reinit-tune verdicts</code> prints the same table): one verdict per task, "
        "size and protocol, never pooling runs that differ in more than their seed. The "
        "estimate is the claim's statistic with its 95% interval and the fewest runs in any "
        f"cell it reads (n). {summary}."
        + (f" {left_out} rows are not listed here (past {MAX_ROWS} rows); "
           "<code>reinit-tune verdicts --json FILE</code> writes them all."
           if left_out else "") + "</p>"
        "<p><input id='claims-filter' placeholder='filter: words that must all appear in a "
        "row' size='50'></p>" + table
        + "<h3>Where the papers disagree</h3>" + "".join(sides) + "</section>"
        "<script>document.getElementById('claims-filter').addEventListener('input',e=>{"
        "const w=e.target.value.toLowerCase().split(/\\s+/).filter(Boolean);"
        "for(const tr of document.querySelectorAll('#claims-table tbody tr')){"
        "const t=tr.textContent.toLowerCase();tr.hidden=!w.every(x=>t.includes(x));}});"
        "</script>")
