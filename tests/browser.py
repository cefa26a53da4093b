"""Headless Chromium (Debian's package) for the tests that look at pages as a person would: the DOM it
built, indexed for assertions, and phone and wide screenshots saved in test-artifacts/."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from itertools import count
from pathlib import Path

import pytest

from tests.conftest import ROOT

ARTIFACTS = ROOT / "test-artifacts"
SIZES = {"phone": "390,844", "wide": "1280,800"}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
VOID = {"meta", "link", "br", "img", "input", "hr", "source", "wbr"}
_profiles = count()


class Dom(HTMLParser):
    """Chromium's serialised DOM, indexed: text by element id, every element's attributes, visible text."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.ids: dict[str, list[str]] = {}
        self.elements: list[tuple[str, dict]] = []
        self.visible: list[str] = []
        self._open: list[tuple[str, str | None]] = []
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.elements.append((tag, attributes))
        if tag in VOID:
            return
        self._open.append((tag, attributes.get("id")))
        if attributes.get("id"):
            self.ids[attributes["id"]] = []

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for _, element_id in self._open:
            if element_id:
                self.ids[element_id].append(data)
        if not any(tag in ("style", "title", "script") for tag, _ in self._open):
            self.visible.append(data)

    def has(self, element_id: str) -> bool:
        return element_id in self.ids

    def text(self, element_id: str) -> str:
        return " ".join("".join(self.ids[element_id]).split())

    def all_text(self) -> str:
        return " ".join("".join(self.visible).split())

    def find(self, tag: str, **attrs) -> list[dict]:
        return [a for t, a in self.elements if t == tag and all(a.get(k) == v for k, v in attrs.items())]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("Debian's chromium is not installed: run `make install-test` (it is in APT_TEST)")
    profile = tmp_path / f"chromium-profile-{next(_profiles)}"  # fresh each launch: no state carried over
    argv = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def open_page(tmp_path: Path, name: str, url: str) -> Dom:
    """Chromium's DOM of the page, with a phone and a wide screenshot saved as artifacts."""
    ARTIFACTS.mkdir(exist_ok=True)
    for label, size in SIZES.items():
        shot = ARTIFACTS / f"dashboard-{name}-{label}.png"
        shot.unlink(missing_ok=True)
        chromium(tmp_path, f"--window-size={size}", f"--screenshot={shot}", url)
        assert shot.stat().st_size > 5_000, f"{shot} looks blank"
    dom = Dom(chromium(tmp_path, "--dump-dom", url).stdout)
    assert dom.find("meta", name="viewport"), "readable on a phone"
    loads = [a for _, a in dom.elements if "src" in a or "href" in a]
    assert loads == [], "no external assets"
    return dom
