"""claims.md §0.2: a paper's layer numbers and blocks on models of other depths."""

from __future__ import annotations

import pytest

from reinit_tune.verdicts.depth import block_name, blocks, map_layer


@pytest.mark.parametrize("layers,want,rounded", [(12, 3, False), (6, 2, True), (24, 6, False),
                                                 (4, 1, False), (2, 1, True)])
def test_first_three_layers(layers, want, rounded):
    m = map_layer(3, layers)
    assert (m.layers, m.rounded) == (want, rounded)
    assert str(m).startswith(f"first 3 of 12 -> first {want} of {layers}")


def test_the_mapping_says_when_it_rounds():
    assert str(map_layer(3, 6)) == "first 3 of 12 -> first 2 of 6 (1.5 rounded half up)"
    assert map_layer(1, 6).layers == 1  # never below one layer


def test_blocks_are_003s_on_bert_base_and_near_equal_elsewhere():
    assert [block_name(b) for b in blocks(12)] == ["1-3", "4-6", "7-9", "10-12"]
    assert [len(b) for b in blocks(6)] == [2, 2, 1, 1]
    assert [len(b) for b in blocks(24)] == [6, 6, 6, 6]
