"""The planner behind core.plan.plan, as a chain of phases over one context and one draft.

- context: what the pass knows and never changes (spec, observation, time, names,
  refusals, config), frozen;
- draft: what the pass decides (revision records, effects, events), the one mutable thing;
- phases_*: the steps, each a function of (context, draft), chosen per case and run in the
  order core.planner.run shows;
- problems, verdicts: the conditions the status shows, each an ordered tuple of rules where
  the first that speaks wins;
- assemble: the status and the actions, built in one place;
- announce: an event only when what it reports changed since the last pass.
"""
