"""The conditions a view shows, as ordered chains of small rules over a `standing` (the
first rule that speaks wins): the problem (Stalled and Degraded) in `problems`, then
Reconciling, Ready and CaughtUp in `verdicts`."""
