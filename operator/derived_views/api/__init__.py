"""The DerivedView API: spec and status models, and the CRD generated from them."""

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, Phase

__all__ = ["DerivedViewSpec", "DerivedViewStatus", "Phase"]
