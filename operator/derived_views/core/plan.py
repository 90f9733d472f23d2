"""plan(spec, observed, now) -> actions: every decision the operator makes, as a pure function.

Reads only its arguments: no clock, no environment, no I/O. The shell carries
the actions out in order and stops at the first failure (see core.actions);
the intent is recorded first and the status last, so a restarted operator
replans from the same facts and resumes where the last pass stopped.

Invariants (property-tested): at most one revision is Active; once a view has
served, the alias only moves to an existing index that passed the lag gate
(or back to the active index if someone moved it), and an index the alias
selects from is never dropped; replanning after a plan succeeded repeats no
effect.

The planner itself lives in core.planner (see its package docstring): a frozen context, one
draft, phases chosen per case, verdicts as chains of rules, one assembler.
"""

from __future__ import annotations

import datetime as dt

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.actions import Action
from derived_views.core.observed import Observed
from derived_views.core.planner import pipeline
from derived_views.core.times import utc


def plan(spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> list[Action]:
    """Decide what to do for one view, given one observation and the time."""
    return pipeline.run(spec, observed, utc(now))
