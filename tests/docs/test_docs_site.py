"""The documentation site builds in strict mode, and its pages cover what they promise: every
page in the navigation, every public ``engine`` name, every setting, every REST operation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

import engine
from app.settings import GROUPS, STREAM_STORE_BACKEND, Settings
from tests.support.backends import backend_independent

pytestmark = backend_independent("the documentation, not the database")

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MKDOCS = Path(sys.executable).with_name("mkdocs")
#: A strict build takes a few seconds here; this much means something is wrong.
BUILD_SECONDS = 60

#: Words of the project's own process that must not reach a reader: the documents the engine
#: was built from, and numbered work items.
JARGON = re.compile(r"\bthe seeds?\b|\bseed's\b|\bseeds/|\bissues? #?\d{1,2}\b", re.IGNORECASE)


def _nav_pages(entries: list[Any]) -> Iterator[str]:
    """Yield every page path of a mkdocs ``nav`` (nested sections included)."""
    for entry in entries:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from _nav_pages(value) if isinstance(value, list) else [value]


def _config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    return loaded


def _markdown_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    # Material prints a notice about its own future on every build; it is not a warning.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    began = time.monotonic()
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_SECONDS * 2,
        check=False,
    )
    took = time.monotonic() - began
    assert built.returncode == 0, built.stderr + built.stdout
    assert "WARNING" not in built.stderr, built.stderr
    assert took < BUILD_SECONDS, f"the strict build took {took:.0f} s"
    assert (tmp_path / "site" / "tutorial" / "index.html").is_file()
    # The CLI reference is generated from the command itself, options included.
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert 'id="dexlite-flows-start"' in cli
    assert "--id-reuse-policy" in cli


def test_the_site_validates_links_and_anchors_and_loads_nothing_from_the_internet() -> None:
    config = _config()
    assert config["strict"] is True
    links = config["validation"]["links"]
    assert {links[k] for k in ("not_found", "anchors", "unrecognized_links")} == {"warn"}
    assert config["theme"]["font"] is False


def test_every_page_of_the_navigation_exists_and_every_page_is_in_it() -> None:
    listed = list(_nav_pages(_config()["nav"]))
    assert len(listed) == len(set(listed)), "a page is listed twice"
    missing = [page for page in listed if not (DOCS / page).is_file()]
    assert missing == []
    unlisted = [p.relative_to(DOCS).as_posix() for p in _markdown_pages()]
    assert sorted(set(unlisted) - set(listed)) == []


def test_the_docs_and_the_readme_speak_the_products_language() -> None:
    texts = [*_markdown_pages(), *DOCS.rglob("*.py"), ROOT / "README.md", ROOT / "mkdocs.yml"]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in texts
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if JARGON.search(line)
    ]
    assert found == []


def test_the_jargon_check_catches_what_it_looks_for() -> None:
    caught = ["as the seed says", "the seeds' rules", "goals of issue 12", "see issues 3"]
    assert all(JARGON.search(text) for text in caught)
    assert not JARGON.search("schemathesis runs with a fixed random seed")


def test_every_public_engine_name_has_an_api_reference_entry() -> None:
    pages = "\n".join(p.read_text() for p in (DOCS / "reference" / "python").glob("*.md"))
    documented = set(re.findall(r"^::: engine\.(\w+)$", pages, flags=re.M))
    assert sorted(set(engine.__all__) - documented) == []
    assert sorted(documented - set(engine.__all__) - {"testing"}) == []


def _setting_variables() -> list[str]:
    """Every setting's variable: ``DEXLITE_<NAME>``, a grouped one's ``DEXLITE_<GROUP>__<NAME>``."""
    names = [name for name in Settings.model_fields if name not in GROUPS]
    names += [
        f"{group}__{field}" for group, model in GROUPS.items() for field in model.model_fields
    ]
    return [f"DEXLITE_{name.upper()}" for name in names]


#: The variables the docs name that are no server settings: the client commands' server, and
#: the test suite's and CI's switches.
NOT_SETTINGS = {
    "DEXLITE_URL",
    "DEXLITE_TEST_BACKEND",
    "DEXLITE_TEST_POSTGRES",
    "DEXLITE_TEST_FORK_SERVERS",
    "DEXLITE_REQUIRE_POSTGRES",
    "DEXLITE_BROWSER_ARTIFACTS",
}
#: A whole variable name; ``DEXLITE_LIMITS__MAX_*`` and ``DEXLITE_<GROUP>__<NAME>`` are patterns.
VARIABLE = re.compile(r"\bDEXLITE_[A-Z0-9_]+\b(?![*<])")


def test_every_setting_is_in_the_settings_table() -> None:
    """Every setting by its name (a grouped one's ``DEXLITE_<GROUP>__<NAME>``), and the Stream
    Store backend's other name."""
    operating = (DOCS / "guides" / "operating.md").read_text()
    names = [*_setting_variables(), STREAM_STORE_BACKEND]
    missing = [name for name in names if f"`{name}`" not in operating]
    assert missing == []


def test_the_docs_name_settings_only_by_their_names() -> None:
    """No page names a variable that sets nothing, such as a grouped setting's flat name from
    before the groups (``DEXLITE_DATABASE_POOL_SIZE`` for ``DEXLITE_POSTGRES__POOL_SIZE``)."""
    known = {*_setting_variables(), STREAM_STORE_BACKEND, *NOT_SETTINGS}
    unknown = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in [*_markdown_pages(), ROOT / "README.md", ROOT / "bench" / "README.md"]
        for name in VARIABLE.findall(path.read_text())
        if name not in known
    ]
    assert unknown == []


def test_the_variable_pattern_finds_whole_names_only() -> None:
    text = "`DEXLITE_MAX_PAGE_SIZE`, DEXLITE_LIMITS__MAX_* and `DEXLITE_<GROUP>__<NAME>`"
    assert VARIABLE.findall(text) == ["DEXLITE_MAX_PAGE_SIZE"]


def test_every_rest_operation_is_in_the_rest_reference() -> None:
    document = json.loads((ROOT / "openapi.json").read_text())
    reference = (DOCS / "reference" / "rest-api.md").read_text()
    missing = [
        f"{method.upper()} {path} ({operation['operationId']})"
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if f"`{method.upper()} {path}` | {operation['operationId']} |" not in reference
    ]
    assert missing == []


def test_the_readmes_pointers_name_files_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"`((?:docs|bench)/[\w./-]*)`", readme))
    assert {"docs/tutorial.md", "docs/getting-started.md"} <= named
    assert sorted(path for path in named if not (ROOT / path).exists()) == []


#: A whole-line snippet inclusion: ``--8<-- "file.py"`` or ``--8<-- "file.py:section"``.
SNIPPET = re.compile(r'^--8<-- "([\w./-]+?)(?::([\w-]+))?"$', re.M)


def test_code_included_from_files_names_sections_that_exist() -> None:
    included = [
        (page.relative_to(DOCS).as_posix(), file, section)
        for page in _markdown_pages()
        for file, section in SNIPPET.findall(page.read_text())
    ]
    assert ("tutorial.md", "fulfillment.py", "charge") in included
    for page, file, section in included:
        source = (DOCS / "examples" / file).read_text()
        if section:
            assert f"# --8<-- [start:{section}]" in source, (page, file, section)
            assert f"# --8<-- [end:{section}]" in source, (page, file, section)


def _code_without_comments(block: str) -> list[str]:
    lines = (re.sub(r"\s+#.*$", "", line).rstrip() for line in block.splitlines())
    return [line for line in lines if line]


def test_getting_started_serves_the_readme_tours_flow() -> None:
    """The guide's ``orders.py`` is the README's tour (tested as written), comments aside."""
    fence = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)
    [tour, *_] = fence.findall((ROOT / "README.md").read_text())
    [guide] = fence.findall((DOCS / "getting-started.md").read_text())
    assert _code_without_comments(guide) == _code_without_comments(tour)
