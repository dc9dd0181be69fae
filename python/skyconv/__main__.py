"""``python -m skyconv``: the ``skyconv`` console script."""

import sys

from .cli import main

sys.exit(main())
