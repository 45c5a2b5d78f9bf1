"""The committed stores still give exactly the docs drawn from them: docs/embedded-model.md
(the runs of examples/embedded-minilm and their claim verdicts), the README's quickstart
verdict (examples/quickstart, the quickstart's own runs) and every figure of both, drawn
now by the commands and compared with the committed images."""

from __future__ import annotations

import importlib.util

from tests.helpers import REPO


def test_the_docs_are_what_their_stores_and_commands_give_now(capsys):
    spec = importlib.util.spec_from_file_location("docs_from_stores",
                                                  REPO / "scripts" / "docs_from_stores.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check"]) == 0, capsys.readouterr().out[-4000:]
    page = (REPO / "docs" / "embedded-model.md").read_text()
    assert "| 003-C13 | supported |" in page  # shuffled layers lose accuracy on real SST-2
    readme = (REPO / "README.md").read_text()
    assert "000-C7   supported" in readme  # the quickstart ends in a decided claim
