"""`python -m derived_views.cli`, the same as the `dv` console script."""

from derived_views.cli.app import run_dv

run_dv()
