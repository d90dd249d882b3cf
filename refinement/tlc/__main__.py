"""`python -m refinement.tlc`: see refinement.tlc.cli."""

import sys

from refinement.tlc.cli import main

sys.exit(main())
