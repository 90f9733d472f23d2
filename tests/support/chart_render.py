"""What the chart tests' fixtures hand out (conftest: `render`, `render_error`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Render = Callable[..., list[dict[str, Any]]]
"""helm template with values -> the rendered objects."""
RenderError = Callable[..., str]
"""helm template with values it must refuse -> helm's message."""
