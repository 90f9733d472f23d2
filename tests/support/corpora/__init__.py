"""The catalogues of hostile and allowed input every layer is run against: transforms,
schemas, cutover checks, tenancy attempts, and what the API server's admission refuses."""
