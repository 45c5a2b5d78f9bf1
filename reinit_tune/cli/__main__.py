"""``python -m reinit_tune.cli``: the ``reinit-tune`` command without its installed script."""

import sys

from reinit_tune.cli import main

sys.exit(main())
