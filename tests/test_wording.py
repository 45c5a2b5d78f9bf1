"""How messages write counts: one noun, plural unless the count is exactly one."""

import numpy as np
import pytest

from reinit_tune.wording import counted


@pytest.mark.parametrize(("n", "noun", "text"), [
    (1, "trial", "1 trial"), (0, "trial", "0 trials"), (2, "trial", "2 trials"),
    (0.5, "GPU", "0.5 GPUs"), (1.0, "GPU", "1 GPU"), (8.0, "GPU", "8 GPUs"),
    (1_000_000, "trial", "1000000 trials"), (np.int64(1), "run", "1 run"),
    (np.int64(3), "run", "3 runs"), (np.float64(2.0), "GPU", "2 GPUs"),
])
def test_a_count_is_plural_unless_exactly_one(n, noun, text):
    assert counted(n, noun) == text
