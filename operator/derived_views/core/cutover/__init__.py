"""What decides a switch of readers besides the lag gate: the cutover checks (`checks`),
the sink's refusals of a switch (`switch_guard`), monotonic reads (`monotonic`), the
deadlines a candidate must meet (`deadlines`) and an index that lost what its ledger
claims (`integrity`)."""
