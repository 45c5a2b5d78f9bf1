"""MkDocs hook: pages whose reference text is generated from the code at build time, so it
cannot drift from it.

- ``<!-- cli-reference -->``: every command and flag of ``reinit-tune``, from its argparse
  parsers (``reinit_tune.cli.parser``), with defaults and help texts.
- ``<!-- family-table -->``: the experiment families and presets, from the registry
  (``reinit-tune families --markdown``).
- ``<!-- benchmark-results -->``: ``benchmarks/RESULTS.md`` as measured.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if not isinstance(a, argparse._SubParsersAction | argparse._HelpAction)]


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _default(action: argparse.Action) -> str:
    default = action.default
    if default is None or default is argparse.SUPPRESS or action.nargs == 0 and not default:
        return ""
    if isinstance(default, list | tuple):
        return " ".join(map(str, default))
    return str(default)


def _section(name: str, parser: argparse.ArgumentParser, level: int,
             only: set[str] | None = None, usage: bool = True) -> list[str]:
    lines = [f"{'#' * level} `{name}`", ""]
    description = (parser.description or "") if usage else ""
    if description:
        lines += [description.strip(), ""]
    if usage:
        lines += ["```text", parser.format_usage().strip(), "```", ""]
    flags = [a for a in _flags(parser) if only is None or a.dest in only]
    if flags:
        lines += ["| flag | default | what it does |", "|---|---|---|"]
        for action in flags:
            names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
            # argparse %-formats help: "%(default)s" and "%%" (a literal %) read as it shows
            helptext = (action.help or "") % {"default": _default(action)} \
                if action.help and "%(" in action.help else (action.help or "").replace("%%",
                                                                                    "%")
            choices = list(map(str, action.choices or []))
            if choices and not isinstance(action.choices, dict) and not all(
                    c in helptext for c in choices):
                helptext += " (one of: " + ", ".join(choices) + ")"
            default = _default(action)
            # a default the parser leaves to the family or the grid is said in the help
            if not default and (said := re.search(r"\s*\(default: ([^()]*)\)", helptext)):
                default = said.group(1)
                helptext = helptext[:said.start()] + helptext[said.end():]
            lines.append(f"| {names} | {_cell(default)} | {_cell(helptext)} |")
        lines.append("")
    return lines


def cli_reference() -> str:
    """Markdown for every command, subcommand and flag of ``reinit-tune``: the flags every
    sweep shares once, then each family's own flags and defaults."""
    from reinit_tune import families
    from reinit_tune.cli import parser

    top = parser()
    lines = _section("reinit-tune", top, 2)
    for name, sub in _subcommands(top).items():
        if name != "sweep":
            lines += _section(f"reinit-tune {name}", sub, 2)
            for action, action_parser in _subcommands(sub).items():  # e.g. store compact
                lines += _section(f"reinit-tune {name} {action}", action_parser, 3)
            continue
        lines += _section("reinit-tune sweep", sub, 2)
        by_family = _subcommands(sub)
        own = {n: {f.dest for f in families.get(n).flags} for n in by_family}
        first = next(iter(by_family))
        shared = {a.dest for a in _flags(by_family[first])} - own[first]
        lines += ["### Flags of every sweep", "",
                  "Every `reinit-tune sweep FAMILY` takes these; a preset changes some "
                  "defaults (its section says which: `reinit-tune sweep FAMILY --help` "
                  "prints them).", ""]
        lines += _section("reinit-tune sweep FAMILY", by_family[first], 4, shared,
                          usage=False)[2:]
        for family, family_parser in by_family.items():
            lines += _section(f"reinit-tune sweep {family}", family_parser, 3, own[family])
    return "\n".join(lines)


def commands_and_flags() -> dict[str, set[str]]:
    """Every command path of ``reinit-tune`` and the option strings it takes (for tests)."""
    from reinit_tune.cli import parser

    found: dict[str, set[str]] = {}

    def walk(path: str, p: argparse.ArgumentParser) -> None:
        found[path] = {s for a in _flags(p) for s in a.option_strings}
        for name, sub in _subcommands(p).items():
            walk(f"{path} {name}", sub)

    walk("reinit-tune", parser())
    return found


def family_table() -> str:
    from reinit_tune.cli import family_table as table

    return table(markdown=True)


def benchmark_results() -> str:
    text = (REPO / "benchmarks" / "RESULTS.md").read_text()
    # the page has its own title; the file's headings move one level down
    return "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())


GENERATED = {
    "<!-- cli-reference -->": cli_reference,
    "<!-- family-table -->": family_table,
    "<!-- benchmark-results -->": benchmark_results,
}


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (MkDocs API)
    for marker, generate in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, generate())
    return markdown
