"""The DerivedViews in manifests: files, folders or stdin, as `helm template` and kustomize
print them (YAML streams of many documents, `List`s).

What `dv plan` reads. Every other kind of document is skipped and counted, so a rendered
chart can be given whole; a document that is not YAML is an error naming its file.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from derived_views.api.constants import GROUP

STDIN = "-"
SUFFIXES = (".yaml", ".yml", ".json")
"""The files of a folder that are read (in name order, not descending into subfolders)."""


class ManifestError(Exception):
    """A manifest that cannot be read, with where."""


@dataclass
class Manifests:
    views: list[dict[str, Any]] = field(default_factory=list)
    """The DerivedView documents, in the order given."""
    skipped: int = 0
    """Documents of other kinds."""


def _files(source: str) -> list[tuple[str, str]]:
    """(name, text) of each file `source` names: itself, a folder's files, or stdin."""
    if source == STDIN:
        return [("<stdin>", sys.stdin.read())]
    path = Path(source)
    if path.is_dir():
        chosen = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in SUFFIXES)
        return [(str(p), p.read_text()) for p in chosen]
    if not path.exists():
        raise ManifestError(f"{source}: no such file or folder")
    return [(str(path), path.read_text())]


def is_view(document: dict[str, Any]) -> bool:
    return (document.get("kind") == "DerivedView"
            and str(document.get("apiVersion", "")).startswith(f"{GROUP}/"))


def parse_stream(text: str, name: str, into: Manifests) -> None:
    """Add the documents of one YAML stream (a `List`'s items one by one)."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ManifestError(f"{name}{where}: not YAML ({problem})") from None
    pending = [d for d in documents if d is not None]
    while pending:
        document = pending.pop(0)
        if not isinstance(document, dict):
            into.skipped += 1
        elif document.get("kind") == "List" and isinstance(document.get("items"), list):
            pending[:0] = [d for d in document["items"] if d is not None]
        elif is_view(document):
            into.views.append(document)
        else:
            into.skipped += 1


def read_manifests(sources: list[str]) -> Manifests:
    """Every document of every source, in order."""
    found = Manifests()
    for source in sources:
        for name, text in _files(source):
            parse_stream(text, name, found)
    return found
