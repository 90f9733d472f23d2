"""The OpenSearch sink: versioned bulk writes and a ledger document per batch (`sink`), the
documents (`docs`), the index mappings (`mapping`) and the HTTP client (`client`)."""
