"""The guide's pictures are today's: each was taken after the last change to the code that draws it."""

from __future__ import annotations

import importlib.util
import json

from conftest import ROOT


def pictures():
    spec = importlib.util.spec_from_file_location("pictures", ROOT / "docs" / "pictures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_picture_is_newer_than_the_code_that_draws_it():
    known = pictures()
    stale = known.stale()
    assert not stale, "\n".join(
        f"docs/{p} was taken before {', '.join(files)} changed: take it again ({known.PICTURES[p][1]}), then "
        f"python docs/pictures.py --stamp docs/{p}"
        for p, files in stale.items()
    )


def test_a_changed_source_makes_its_picture_stale(tmp_path, monkeypatch):
    known = pictures()
    (tmp_path / "view.js").write_text("one", encoding="utf-8")
    monkeypatch.setattr(known, "ROOT", tmp_path)
    monkeypatch.setattr(known, "MANIFEST", tmp_path / "pictures.json")
    monkeypatch.setattr(known, "PICTURES", {"a.png": (["*.js"], "take it"), "b.png": (["none/*"], "take it")})
    known.stamp(["a.png", "b.png"])
    assert known.stale() == {}
    (tmp_path / "view.js").write_text("two", encoding="utf-8")
    assert known.stale() == {"a.png": ["view.js"]}
    (tmp_path / "new.js").write_text("", encoding="utf-8")  # a new source counts too
    assert known.stale() == {"a.png": ["new.js", "view.js"]}
    known.stamp(["a.png"])
    assert known.stale() == {} and set(json.loads((tmp_path / "pictures.json").read_text())) == {"a.png", "b.png"}
