"""The PostgreSQL sink: each batch's rows and its ledger row in one transaction (`sink`),
staged in parallel from the executors (`stage`, `copy_text`) and merged in bulk where an
index no reader sees is loaded (`bulk`)."""
