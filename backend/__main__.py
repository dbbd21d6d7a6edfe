"""``python -m tilecute``: the ``tilecute`` command line (see ``tilecute.cli``)."""

import sys

from .cli import main

sys.exit(main())
