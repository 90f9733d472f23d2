"""`python -m derived_views.cli`, the same as the `dv` console script."""

from derived_views.cli.app import main

main()
