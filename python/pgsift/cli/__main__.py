"""`python -m pgsift.cli`: the same as the `pgsift` command."""

import sys

from . import main

sys.exit(main())
