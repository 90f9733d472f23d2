"""The OpenSearch sink as the operator sees it: its client, the ledger the job writes
(`ledger`), the session the pass holds (indexes, the alias, ownership) and the cutover
checks (`checks`)."""
