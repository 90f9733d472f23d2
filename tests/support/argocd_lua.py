"""Argo CD's health script under Lua 5.1, the language of Argo CD's interpreter (gopher-lua).

lupa's default runtime is a newer Lua (integers, `//`, `goto`); a script that only works
there would fail in Argo CD, so the tests use lupa's bundled Lua 5.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lupa.lua51 as lua51

CUSTOMIZATION = (Path(__file__).resolve().parents[2] / "gitops" / "argocd" /
                 "resource_customizations" / "derivedviews.io" / "DerivedView")
SCRIPT_PATH = CUSTOMIZATION / "health.lua"


def to_lua(lua: Any, value: Any) -> Any:
    """Nested dicts/lists as Lua tables (lists 1-based, as Argo CD's JSON decoding gives)."""
    if isinstance(value, dict):
        return lua.table_from({k: to_lua(lua, v) for k, v in value.items()})
    if isinstance(value, list):
        return lua.table_from([to_lua(lua, v) for v in value])
    return value


def health(obj: dict[str, Any], script: str | None = None) -> tuple[str, str]:
    """(status, message) the script gives for `obj`, as Argo CD would evaluate it."""
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    assert lua.eval("_VERSION") == "Lua 5.1"
    lua.globals().obj = to_lua(lua, obj)
    hs = lua.execute(script if script is not None else SCRIPT_PATH.read_text())
    return str(hs["status"]), str(hs["message"])
