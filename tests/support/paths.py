"""The checkout's root, for tests that read the repository's files (charts, CRDs, docs):
one definition, whatever folder a test sits in."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
