"""``python -m skyconv.cli``: the ``skyconv`` console script."""

import sys

from .main import main

sys.exit(main())
