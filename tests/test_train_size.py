"""``TrainSize``: counts, fractions and the full split, parsed, shown and resolved."""

from __future__ import annotations

import pytest

from reinit_tune import TrialConfig
from reinit_tune.errors import InputError
from reinit_tune.train_size import TrainSize


@pytest.mark.parametrize("value,wanted", [(None, 1000), (0.1, 100), (0.0001, 1), (400, 400)])
def test_train_size_resolves_against_the_official_split(value, wanted):
    size = TrialConfig("bert-base-uncased", "sst2", train_size=value).size
    assert size == TrainSize(value) == TrainSize.of(size)
    assert size.wanted(1000) == wanted and size.resolve(500, 1000) == wanted
    assert size.label == ("full" if value is None else str(value))


def test_train_size_parses_the_command_text():
    assert [TrainSize.parse(t) for t in ("500", "0.1", "full", "ALL")] == [500, 0.1, None, None]
    with pytest.raises(InputError, match="exceeds the 10 rows of the rte train split"):
        TrainSize(11).wanted(10, "rte")



@pytest.mark.parametrize("value,message", [
    (0, "must be a positive count, got 0"), (1.5, "a fraction must lie in"),
    ("500", "must be None, a count or a fraction"), (True, "must be None, a count")])
def test_a_size_that_is_no_count_fraction_or_full_is_refused(value, message):
    with pytest.raises(InputError, match=message):
        TrainSize(value)


def test_sizes_are_shown_as_messages_and_listings_name_them():
    assert TrainSize(0.1).shown == "0.1 (10.0% of the split)"
    assert TrainSize(None).shown == "full (all of the split)" and TrainSize(500).shown == "500"
    assert not TrainSize(600).fits(500) and TrainSize(0.9).fits(5) and TrainSize().fits(1)
