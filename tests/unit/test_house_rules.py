"""The house rules of issue 49, over the whole tree: every module of the operator and the
job in a layers contract with no ignored import and no import circle; no folder of more than
15 modules; no public name defined by two modules of one package; docs/architecture.md's
folder map in step with the sources. Read from the files (tests/support/house.py): the
stack is held to them without being imported."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from support import house

FOLDER_LIMIT = 15


@pytest.mark.parametrize("package", house.PRODUCT)
def test_every_module_is_in_a_layers_contract(package: str) -> None:
    layered = [m for c in house.contracts() if c.get("type") == "layers"
               for m in house.layer_modules(c)]
    outside = [m.name for m in house.modules(package) if not house.covered(m, layered)]
    assert outside == [], f"modules in no layers contract (pyproject.toml): {outside}"


def test_no_contract_ignores_an_import() -> None:
    assert [c["name"] for c in house.contracts() if c.get("ignore_imports")] == []


def test_every_layer_a_contract_names_exists() -> None:
    """A layer renamed in the tree but not in the contract would cover nothing, silently."""
    known = {m.name for m in house.all_modules()}
    missing = [(c["name"], m) for c in house.contracts() if c.get("type") == "layers"
               for m in house.layer_modules(c) if m not in known]
    assert missing == []


@pytest.mark.parametrize("package", house.PACKAGES)
def test_no_import_circle(package: str) -> None:
    mods = house.modules(package)
    known = {m.name for m in mods}
    graph = {m.name: house.imported(m, known) for m in mods}
    assert house.cycles(graph) == []


@pytest.mark.parametrize("package", house.PACKAGES)
def test_no_folder_holds_more_than_fifteen_modules(package: str) -> None:
    crowded = {str(f.relative_to(house.ROOT)): len(ms)
               for f, ms in house.folders(package).items() if len(ms) > FOLDER_LIMIT}
    assert crowded == {}, "split these folders by concern"


@pytest.mark.parametrize("package", house.PACKAGES)
def test_no_public_name_is_defined_by_two_modules(package: str) -> None:
    """One name, one thing: two `judge`s or two `observe`s make a reader ask which one."""
    where: dict[str, list[str]] = defaultdict(list)
    for module in house.modules(package):
        for name in house.public_names(module):
            where[name].append(module.name)
    assert {n: ms for n, ms in where.items() if len(ms) > 1} == {}


def test_the_architecture_map_is_in_step_with_the_sources() -> None:
    assert house.written_map() == house.folder_map(), (
        "docs/architecture.md's folder map is stale: run `make architecture`")


RETIRED = {
    r"\bbase_name\b": "alias",
    r"\balias_display\b": "qualified_alias",
    r"\bbase_field\b": "alias_field",
    r"\bOperatorConfig\b": "Settings",
    r"\b(deps|observed|ctx)\.(config|cfg)\b": "settings",
    r"def \w+\(self, scope: str": "schema",
}
"""Names the glossary (docs/glossary.md) replaced, and the word to use instead."""


def test_the_operator_speaks_the_glossary() -> None:
    spoken = [(m.name, word) for m in house.modules("derived_views")
              for pattern, word in RETIRED.items()
              if re.search(pattern, m.path.read_text())]
    assert spoken == [], "say it as docs/glossary.md does"


DOCS = ["README.md", "CONTRIBUTING.md", "stack/README.md", "spark_templates/README.md",
        *(p.relative_to(house.ROOT).as_posix() for p in (house.ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS)
def test_the_files_a_page_names_exist(doc: str) -> None:
    """A moved module must not leave a guide pointing at nothing."""
    text = (house.ROOT / doc).read_text()
    named = set(re.findall(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|md|sh|yaml|toml))`", text))
    missing = sorted(n for n in named
                     if not any((base / n).exists() for base in _bases(doc)))
    assert missing == []


def _bases(doc: str) -> list[Path]:
    """A page names files from the repository's root, its own folder, or a package root."""
    return [house.ROOT, (house.ROOT / doc).parent, house.ROOT / "operator" / "derived_views",
            house.ROOT / "operator", house.ROOT / "spark_templates", house.ROOT / "stack"]
