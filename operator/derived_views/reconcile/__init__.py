"""observe -> plan -> act for one DerivedView: the imperative shell around the planner.

Modules: `run` (the pass and its outcome), `observe`, `act`, `secrets` (the pass's
reading of Secrets), `deps` (what a pass is handed).

A pass is three named steps. `observe` reads everything the planner needs (the
view's jobs, its sink, its Secrets, its topics' end offsets, the cutover checks'
run) and writes nothing; `plan` (core.plan.plan) decides; `act` carries the
actions out, the upkeep too (the check runner's runs, the ledger's pruning: both
planned, see core.actions.UPKEEP). The pass returns its outcome
(PassOutcome: released, and what a settled view read for the settled watch);
the caller, not the pass, tells the watch.

The planner's first action is `RecordIntent`, patched into status before any
other effect, so an operator that dies mid-way replans from a fresh
observation and resumes.  Actions run in order; the first failure stops the
pass (the next pass replans).
"""
