"""Screenshots as test artifacts: saved under the test's pytest ``tmp_path``
(``.../screenshots/<name>.png``, the folder printed with ``-s``) and, once the test has passed,
copied to the folder the ``DEXLITE_BROWSER_ARTIFACTS`` environment variable names when it is
set (for example ``tests/browser/artifacts/``, which git ignores)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from playwright.sync_api import Page

SHOTS_ENV = "DEXLITE_BROWSER_ARTIFACTS"


class Shots:
    """The screenshots one test takes."""

    def __init__(self, tmp_path: Path) -> None:
        self.folder = tmp_path / "screenshots"
        self.folder.mkdir(exist_ok=True)
        self.saved: list[Path] = []

    def take(self, page: Page, name: str, *, full_page: bool = True) -> Path:
        """Save a screenshot of the page (the whole page unless ``full_page`` is False)."""
        path = self.folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        self.saved.append(path)
        return path

    def publish(self) -> None:
        """Print where the screenshots are, and copy them to ``$DEXLITE_BROWSER_ARTIFACTS``."""
        print(f"screenshots: {self.folder}")
        if target := os.environ.get(SHOTS_ENV):
            out = Path(target)
            out.mkdir(parents=True, exist_ok=True)
            for path in self.saved:
                shutil.copy2(path, out / path.name)
            print(f"screenshots copied to {out}")
