"""`python -m fleetops` is the same as the `fleetops` console script."""
from fleetops.cli import main

raise SystemExit(main())
