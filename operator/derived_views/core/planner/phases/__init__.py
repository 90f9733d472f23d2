"""The planner's phases, one module per concern, each a function of (context, draft): start
the spec's revision, build the candidate, cut over, serve and retire, delete, and the
upkeep of every pass. `core.planner.pipeline` lists which run, in which order."""
