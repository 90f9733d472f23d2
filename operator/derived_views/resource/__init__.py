"""The DerivedView custom resource: spec and status models, and the CRD generated from them."""
