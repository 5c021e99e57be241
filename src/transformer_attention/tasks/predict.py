"""`python predict.py`: classify texts with a checkpoint alone (`text=`, `texts=[...]`, `text_file=`, `-`: stdin):
a line per text, `predictions.jsonl` and, with `save_attention`, each text's attention as PNGs (`png`: its layers,
rollout and text view) or an interactive page with its word attributions (`html`), or both."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from omegaconf import DictConfig
from torch.utils.tensorboard import SummaryWriter

from ..analysis.agreement import agreement_over_texts
from ..analysis.faithfulness import Explained
from ..analysis.pages import evidence_note, page_words
from ..analysis.run import explain_rows
from ..callbacks.page_summary import log_page
from ..checks import is_whole
from ..data.labels import names_or_ids
from ..data.tokenizer import load_tokenizer
from ..errors import ConfigError, InputError, printable
from ..files import atomic_write, shown
from ..inference import Prediction, infer, predict, trained_length
from ..plotting import ReviewText, paragraphs, plot_rollout, save_attention_png, save_figure
from ..plotting.html import render_page
from ..plotting.page_data import page_data
from ..plotting.review import cut_review, plain, read_note
from ..plotting.scales import DEFAULT_SCALE, MAP_KINDS, SCALES
from ..plotting.words import POOLED_ROW
from ..training.checkpoint import load_module

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


def read_texts(text: str | None = None, texts: Sequence[str] | None = None, text_file: str | None = None) -> list[str]:
    """`text`, then `texts`, then the non-empty lines of `text_file` (`-`: stdin); an InputError for none at all, a
    blank one, or a file that cannot be read."""
    given = ([] if text is None else [("text", str(text))]) + [
        (f"texts[{i}]", str(t)) for i, t in enumerate(texts or [])
    ]
    blank = next((name for name, t in given if not t.strip()), None)
    if blank is not None:
        raise InputError(f"{blank} is empty: a text to classify needs at least one word (drop it, or give its words)")
    out = [t for _, t in given]
    if text_file:
        out += [line.strip() for line in _read_lines(text_file) if line.strip()]
    if not out:
        raise InputError('nothing to classify: pass text="...", texts=["...","..."] or text_file=<path> (- for stdin)')
    return out


def _read_lines(text_file: str) -> list[str]:
    """One text per `\n`-terminated line (a final `\r` dropped): not str.splitlines, which also breaks lines at
    U+0085, U+2028, form feeds and lone `\r`, all found inside real reviews."""
    if text_file == "-":
        name, data = "stdin", sys.stdin.buffer.read()
    else:
        path = Path(text_file).expanduser()
        if not path.is_file():
            raise InputError(f"text_file={text_file}: {path.resolve()} does not exist")
        name = str(path.resolve())
        try:
            data = path.read_bytes()
        except OSError as err:
            raise InputError(f"text_file={text_file}: cannot read {name} ({err.strerror})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        fix = "convert it, e.g. iconv -f latin1 -t utf-8"
        where = f"byte {data[err.start]:02x} at line {line}"
        raise InputError(f"text_file={text_file}: {name} is not UTF-8 text ({where}): {fix}") from None
    return [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")]


def caption(pred: Prediction, pooling: str) -> str:
    """What a prediction's pictures are titled: the label, its probability, the text (`<br />` as a space; how much
    of it the model read where it was cut), the pooled row."""
    text = read_note(len(pred.tokens), pred.text_tokens) + " ".join(plain(pred.text).split())
    return f"{pred.label} ({pred.probabilities[pred.label]:.2f}): {text[:80]} \u00b7 pooled: {POOLED_ROW[pooling]}"


def save_pngs(pred: Prediction, folder: Path, index: int, pooling: str, scale: str) -> dict[str, Any]:
    """One prediction's pictures and their paths for its record: `<index>_layer<l>.png` (a panel per head, then
    their mean), `<index>_rollout.png` and `<index>_text.png` (the words shaded by each layer, the rollout)."""
    title, maps, name = caption(pred, pooling), pred.attentions or [], f"{index:04d}"
    layers = [
        save_attention_png(
            folder / f"{name}_layer{layer}.png",
            pred.tokens,
            weights,
            title=f"layer {layer} | {title}",
            mean=True,
            scale=scale,
            pooling=pooling,
        )
        for layer, weights in enumerate(maps)
    ]
    rollout = plot_rollout(pred.tokens, maps, f"{title} \u00b7 rollout", pooling=pooling, scale=scale)
    pooled, labels = paragraphs(maps, pooling)  # (P, T): a row a paragraph
    text = ReviewText(pred.tokens, len(pooled), title, pooling=pooling, scale=scale).draw(pooled, labels)
    return {
        "attention_png": [str(path) for path in layers],
        "rollout_png": str(save_figure(rollout, folder / f"{name}_rollout.png")),
        "text_png": str(save_figure(text, folder / f"{name}_text.png")),
    }


ATTENTION_FORMATS = {False: (), "none": (), True: ("png",), "png": ("png",), "html": ("html",), "both": ("png", "html")}


def attention_formats(value: object) -> tuple[str, ...]:
    """What `save_attention` asks for: (), ("png",), ("html",) or both."""
    key = value.lower() if isinstance(value, str) else value
    if value is None or isinstance(value, bool | str) and key in ATTENTION_FORMATS:
        return ATTENTION_FORMATS.get(key, ())
    raise ConfigError(
        f"save_attention={value!r} is not a choice: use false, true (= png), png, html (an interactive page per "
        "text) or both"
    )


def main(cfg: DictConfig) -> list[Prediction]:
    """Classify the given texts, print them, write predictions.jsonl (and the attention pictures)."""
    formats = attention_formats(cfg.get("save_attention"))
    kind = cfg.get("attention_map") or "weight"
    if kind not in MAP_KINDS:
        raise ConfigError(f"attention_map={kind}: not a map kind; use weight or norm (weight x norm, rows as shares)")
    scale = cfg.get("scale") or DEFAULT_SCALE
    if scale not in SCALES:
        raise ConfigError(
            f"scale={scale}: not a colour scale; use one of {', '.join(SCALES)} (e.g. scale={DEFAULT_SCALE})"
        )
    texts = read_texts(cfg.get("text"), cfg.get("texts"), cfg.get("text_file"))
    module = load_module(cfg.get("ckpt_path"), map_location=cfg.get("device") or "cpu")
    trained, length = trained_length(module), cfg.get("max_length")
    if length not in (None, trained) and is_whole(length, 2) and length <= module.hparams["max_len"]:
        cut = f"texts cut at {length} tokens, not at the {trained} {shown(cfg.ckpt_path)} was trained with"
        log.warning("max_length=%s: %s", length, cut)  # a longer one is refused below, a shorter one kept
    preds = predict(
        module,
        texts,
        need_weights=bool(formats),
        batch_size=cfg.batch_size,
        max_length=cfg.get("max_length"),
    )
    explained: list[Explained | None] = [None] * len(preds)
    norms: list[list[torch.Tensor] | None] = [None] * len(preds)
    removal, agreement, notes = "", None, [""] * len(preds)
    assert module.tokenizer_json is not None  # predict() refuses a module without a tokenizer
    tok = load_tokenizer(module.tokenizer_json)
    # the model's own tokens back to its ids (each has one: they came from this tokenizer)
    rows = cast("list[list[int]]", [[tok.token_to_id(t) for t in p.tokens] for p in preds])
    if "html" in formats or (formats and kind == "norm"):  # the norm-weighted maps, as the model computes them
        norms = [r.attentions for r in infer(module, rows, need_norms=True, batch_size=cfg.batch_size)]
    if "html" in formats:  # the pages' word attributions (analysis/)
        names = module.hparams.get("label_names")
        explained, removal = explain_rows(module.net, rows, tok, cfg.get("analysis"), label_names=names)
        found = [e.scores for e in explained if e is not None]
        agreement = agreement_over_texts(found) if len(found) > 1 else None  # beside each text's, on every page
        label_of = dict(enumerate(names_or_ids(names, module.hparams["num_classes"])))
        notes = [
            evidence_note(module.net, r, e.target if e else None, label_of)
            for r, e in zip(rows, explained, strict=True)
        ]
    run, pooling = Path(cfg.paths.output_dir), module.hparams.get("pooling", "cls")
    tab = SummaryWriter(str(run)) if "html" in formats and cfg.get("tensorboard") else None  # the ATTENTION tab
    records = []
    for i, p in enumerate(preds):
        record = {**p.to_dict(), "tokens_read": len(p.tokens), "truncated": p.text_tokens > len(p.tokens)}
        if "png" in formats:
            drawn, norm = p, norms[i]  # norms: computed for kind=norm
            if kind != "weight" and norm is not None:  # weight x norm, each row's shares
                drawn = replace(p, attentions=[n / n.sum(-1, keepdim=True).clamp(min=1e-12) for n in norm])
            record.update(save_pngs(drawn, run / "attention", i, pooling, scale))
        if "html" in formats:
            probs = ", ".join(f"{name} {prob:.2f}" for name, prob in p.probabilities.items())
            data = page_data(
                p.tokens,
                p.attentions or [],
                title=f"text_{i}",
                caption=f"{p.label} ({probs})",
                review=cut_review(p.text, len(p.tokens), tok),
                pooling=pooling,
                norms=norms[i],
                **page_words(p.probabilities, explained[i], removal, agreement, notes[i]),
            )
            path = atomic_write(run / "attention" / f"{i:04d}.html", render_page(data))
            if tab is not None:
                log_page(tab, f"predict/text_{i}", data, step=0)
            record["attention_html"] = str(path)
        records.append(json.dumps(record, ensure_ascii=False) + "\n")
    atomic_write(run / "predictions.jsonl", "".join(records))
    if tab is not None:
        tab.close()
    for p in preds:
        probs = "  ".join(f"{name}={prob:.4f}" for name, prob in p.probabilities.items())
        note = read_note(len(p.tokens), p.text_tokens)  # "read 64 of 494 tokens: " where the text was cut
        print(f"{printable(p.label):<12} {printable(probs)}  | {note}{printable(p.text)}")  # names from a file
    print(f"predictions: {shown(run / 'predictions.jsonl')}")
    if formats:
        pages = " (<i>.html: open it in a browser)" if "html" in formats else ""
        print(f"attention maps: {shown(run / 'attention')}{pages}")
    return preds
