"""What an apply would do to a view, before it is applied: its change, its refusals, its cost.

`dv plan` asks this of every DerivedView in a manifest: pure functions of the manifest's
spec, the live view's spec and status (None for a new view), the installation's settings and
the time, answered with the operator's own functions (revision_of, job_settings_of, the
judges), never a copy of them.

- change: no change, settings in place, checks, a rollback, or a new revision that replays;
- refusals: what the operator (or the API server, as the shell reports it) would refuse;
- replay_cost: what a replay reads, per partition, and how long the view's own builds took;
- footprint: what a replay holds while it runs: its job's Spark resources (and both jobs'),
  how long two jobs run side by side, the sink space;
- previews: one view's preview, and the exit code of many.
"""
