"""Which code draws each of the guide's pictures, and whether a picture is older than that code: each picture's
sources are hashed when it is taken (docs/pictures.json), and a test compares those hashes with today's files, so a
change to a view fails until its pictures are taken again (with the command named here).

    python docs/pictures.py                  # the pictures whose sources changed since they were taken
    python docs/pictures.py --stamp a.png    # record a.png's sources as they are now (after taking it again)
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
PACKAGE = "src/transformer_attention/"
MANIFEST = DOCS / "pictures.json"

# what each picture is drawn by (files or globs under the repository), and the command that takes it again
TENSORBOARD = "python docs/screenshots.py --real <a Rotten Tomatoes run folder>"
PAGE = "python docs/screenshots.py --page <the Rotten Tomatoes recipe's checkpoint>"
IMAGES = [f"{PACKAGE}callbacks/attention_maps.py", f"{PACKAGE}callbacks/text_view.py", f"{PACKAGE}plotting/*.py"]
PAGE_SOURCES = [f"{PACKAGE}plotting/page/*", f"{PACKAGE}plotting/page_data.py", f"{PACKAGE}plotting/html.py"]
PREDICT = "python predict.py ckpt_path=<the toy run's best .ckpt> 'text=\"the plot is not good\"' save_attention=png"
PLUGIN_STATIC = [f"{PACKAGE}tensorboard_plugin/static/*"]
PICTURES: dict[str, tuple[list[str], str]] = {
    "tensorboard_timeseries.png": ([f"{PACKAGE}training/metrics.py", f"{PACKAGE}module.py"], TENSORBOARD),
    "tensorboard_scalars.png": ([f"{PACKAGE}training/metrics.py", f"{PACKAGE}module.py"], TENSORBOARD),
    "tensorboard_hparams.png": ([f"{PACKAGE}training/hparams.py", f"{PACKAGE}training/columns.py"], TENSORBOARD),
    "tensorboard_images.png": (IMAGES, TENSORBOARD),
    "tensorboard_attention.png": ([f"{PACKAGE}tensorboard_plugin/*.py", *PLUGIN_STATIC, *PAGE_SOURCES], TENSORBOARD),
    "html_view.png": (PAGE_SOURCES, PAGE),
    "html_model_view.png": (PAGE_SOURCES, PAGE),
    "html_text.png": (PAGE_SOURCES, PAGE),
    "html_words.png": (PAGE_SOURCES, PAGE),
    "text_view.png": (IMAGES, "python benchmarks/text_view.py <checkpoint> docs/text_view.png"),
    "attention_example.png": (IMAGES, f"{PREDICT}, then copy its attention/0000_layer1.png"),
    "rollout.png": (IMAGES, f"{PREDICT}, then copy its attention/0000_rollout.png"),
    "text_view_decompx.png": (IMAGES, "python benchmarks/text_view.py <checkpoint> docs/text_view_decompx.png"),
}


def hashes(picture: str) -> dict[str, str]:
    """Each source file of `picture` (relative to the repository) -> the SHA-256 of its bytes now."""
    files = sorted({p for pattern in PICTURES[picture][0] for p in ROOT.glob(pattern) if p.is_file()})
    return {p.relative_to(ROOT).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def stale() -> dict[str, list[str]]:
    """Each picture whose sources differ from those recorded when it was taken -> the files that differ."""
    recorded = json.loads(MANIFEST.read_text(encoding="utf-8")) if MANIFEST.exists() else {}
    out = {}
    for picture in PICTURES:
        then, now = recorded.get(picture, {}), hashes(picture)
        if changed := sorted(f for f in then.keys() | now.keys() if then.get(f) != now.get(f)):
            out[picture] = changed
    return out


def stamp(pictures: list[str]) -> None:
    """Record `pictures`' sources as they are now: call it right after taking them again."""
    unknown = [p for p in pictures if p not in PICTURES]
    if unknown:
        raise SystemExit(f"not a picture this file knows: {unknown}; the choices are {sorted(PICTURES)}")
    recorded = json.loads(MANIFEST.read_text(encoding="utf-8")) if MANIFEST.exists() else {}
    recorded.update({p: hashes(p) for p in pictures})
    MANIFEST.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stamp", nargs="+", metavar="PICTURE", help="record these pictures' sources as they are")
    args = parser.parse_args()
    if args.stamp:
        return stamp([Path(p).name for p in args.stamp])
    for picture, files in stale().items():
        print(f"docs/{picture}: {', '.join(files)} changed since it was taken; again: {PICTURES[picture][1]}")


if __name__ == "__main__":
    main()
