"""python -m refinement.chaos: see refinement.chaos.cli."""

from refinement.chaos.cli import main

raise SystemExit(main())
