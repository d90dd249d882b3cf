"""`python -m kraft.cli`: the `kraft` command."""

from kraft.cli import main

raise SystemExit(main())
