"""The built user guide: formulas read as text (no raw TeX), every picture opens full size, offline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import pytest
from conftest import ROOT

pytest.importorskip("mkdocs", reason="the user guide needs the docs extra: pip install -e '.[docs]'")
pytest.importorskip("mkdocs_glightbox", reason="the user guide needs the docs extra: pip install -e '.[docs]'")


class Page(HTMLParser):
    """A built page's images (src, and the href of the link around each) and its text outside code and scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[tuple[str, str | None]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._links: list[str | None] = []
        self._code = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self._links.append(attrs.get("href"))
        elif tag == "img":
            self.images.append((attrs["src"], self._links[-1] if self._links else None))
        if tag == "script" and attrs.get("src"):
            self.scripts.append(attrs["src"])
        if tag in ("code", "pre", "script", "style"):
            self._code += 1

    def handle_endtag(self, tag):
        if tag == "a" and self._links:
            self._links.pop()
        elif tag in ("code", "pre", "script", "style"):
            self._code -= 1

    def handle_data(self, data):
        if not self._code:
            self.text.append(data)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    # not --quiet: it hides the warnings that --strict counts
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)]
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return site


def read(page: Path) -> Page:
    parsed = Page()
    parsed.feed(page.read_text(encoding="utf-8"))
    return parsed


def guide_pages(site: Path) -> list[Path]:
    return [p for p in sorted(site.rglob("index.html")) if "search" not in p.parts]


def test_formulas_are_text_not_tex(site):
    text = "".join(read(site / "analysis" / "index.html").text)
    assert "$" not in text, f"raw $ formula on the analysis page: {text[text.index('$') - 40 : text.index('$') + 40]!r}"
    assert "∂" in text and "⌈" in text and "∣" in text  # the formulas are there, written out
    for page in guide_pages(site):
        text = "".join(read(page).text)
        tex = re.findall(r"\\[A-Za-z]+|\$[^$\s][^$]*\$", text)  # a command (\lVert, \alpha, ...) or $...$
        assert not tex, f"{page.relative_to(site)}: raw TeX {tex}"


def test_every_picture_links_to_its_full_size_file(site):
    shown = 0
    for page in guide_pages(site):
        parsed = read(page)
        url = page.relative_to(site).as_posix()
        for src, href in parsed.images:
            assert href is not None, f"{url}: {src} does not open full size"
            assert urljoin(url, href) == urljoin(url, src), f"{url}: {src} links to {href}"
            built = site / urljoin(url, src)
            # the file the link opens is the committed picture itself, not a scaled copy
            assert built.read_bytes() == (ROOT / "docs" / built.relative_to(site)).read_bytes()
            shown += 1
        if parsed.images:  # the lightbox's script is served by the site itself: it works offline
            assert any(s.endswith("glightbox.min.js") and "//" not in s for s in parsed.scripts), url
    assert shown >= len(list((ROOT / "docs").glob("*.png")))


def test_the_screenshot_script_stays_out_of_the_site(site):
    assert not list(site.rglob("*.py"))
