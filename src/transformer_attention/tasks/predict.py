"""`python predict.py`: classify texts with a checkpoint alone.

Texts come from `text=`, `texts=[...]`, `text_file=` (`-` is stdin); it prints one line per text, writes
`predictions.jsonl` and, with `save_attention=true` (or `png`), one attention PNG per text and layer (every head
in its own panel), the rollout and the text shaded by the pooled row (a paragraph per layer, then the rollout) in
the run folder, coloured on `scale` (plotting/scales.py); `save_attention=html` writes one interactive page per text
instead (plotting/html.py), with each word's attribution by attention, rollout, Integrated Gradients and
leave-one-out and their faithfulness on that text (analysis/, settings analysis.*); `both` writes both.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from omegaconf import DictConfig

from ..analysis.agreement import agreement_over_texts
from ..analysis.faithfulness import Explained
from ..analysis.methods import TEXT_METHOD, labels, signed
from ..analysis.run import explain_rows
from ..data.tokenizer import load_tokenizer
from ..errors import CheckpointError, ConfigError, InputError, printable
from ..files import atomic_write, shown
from ..inference import Prediction, infer, predict
from ..plotting import ReviewText, paragraphs, plot_rollout, save_attention_html, save_attention_png, save_figure
from ..plotting.review import Review, cut_review, plain, read_note
from ..plotting.scales import DEFAULT_SCALE, MAP_KINDS, SCALES
from ..plotting.words import POOLED_ROW
from ..training.checkpoint import load_module

if TYPE_CHECKING:
    import torch


def read_texts(text: str | None = None, texts: Sequence[str] | None = None, text_file: str | None = None) -> list[str]:
    """All texts given: `text`, then `texts`, then the non-empty lines of `text_file` (`-` = stdin).
    None at all, an empty or blank `text` / `texts` entry, or a `text_file` that cannot be read is an InputError."""
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
    """One text per `\n`-terminated line, exactly (a final `\r` dropped): not str.splitlines, which also
    breaks lines at U+0085, U+2028, form feeds and lone `\r`, all of which occur inside real reviews."""
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
        raise InputError(
            f"text_file={text_file}: {name} is not UTF-8 text (byte {data[err.start]:02x} at line {line}): "
            f"convert it, e.g. iconv -f latin1 -t utf-8"
        ) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the last line's own terminator
    return [line.removesuffix("\r") for line in lines]


def caption(pred: Prediction, pooling: str) -> str:
    """What a prediction's pictures are titled: the label, its probability, the text (`<br />` as a space; how much
    of it the model read where it was cut), the pooled row."""
    text = read_note(len(pred.tokens), pred.text_tokens) + " ".join(plain(pred.text).split())
    return f"{pred.label} ({pred.probabilities[pred.label]:.2f}): {text[:80]} \u00b7 pooled: {POOLED_ROW[pooling]}"


def save_attention_pngs(
    pred: Prediction, folder: Path, index: int, pooling: str = "cls", scale: str = DEFAULT_SCALE
) -> list[Path]:
    """One PNG per layer for one prediction: `<folder>/<index>_layer<l>.png`, a panel per head and their mean."""
    title = caption(pred, pooling)
    return [
        save_attention_png(
            folder / f"{index:04d}_layer{layer}.png", pred.tokens, weights, title=f"layer {layer} | {title}",
            mean=True, scale=scale, pooling=pooling,
        )
        for layer, weights in enumerate(pred.attentions or [])
    ]  # fmt: skip


def _weights(pred: Prediction) -> list[torch.Tensor]:
    """`pred`'s attention weights, one (H, T, T) tensor per layer; a ValueError when it was made without them."""
    if pred.attentions is None:
        raise ValueError("this prediction has no attention weights: make it with predict(..., need_weights=True)")
    return pred.attentions


def save_rollout_png(
    pred: Prediction, folder: Path, index: int, pooling: str = "cls", scale: str = DEFAULT_SCALE
) -> Path:
    """The attention rollout of one prediction (each token's share in the pooled vector, through all layers):
    `<folder>/<index>_rollout.png`."""
    fig = plot_rollout(
        pred.tokens, _weights(pred), f"{caption(pred, pooling)} \u00b7 rollout", pooling=pooling, scale=scale
    )
    return save_figure(fig, folder / f"{index:04d}_rollout.png")


def save_text_png(pred: Prediction, folder: Path, index: int, pooling: str = "cls", scale: str = DEFAULT_SCALE) -> Path:
    """The text of one prediction, each word shaded by the pooled row, a paragraph per layer (mean of heads) and
    the rollout: `<folder>/<index>_text.png`."""
    pooled, labels = paragraphs(_weights(pred), pooling)  # (P, T): a row a paragraph
    view = ReviewText(pred.tokens, len(pooled), caption(pred, pooling), pooling=pooling, scale=scale)
    return save_figure(view.draw(pooled, labels), folder / f"{index:04d}_text.png")


def save_attention_page(
    pred: Prediction,
    folder: Path,
    index: int,
    explained: Explained | None = None,
    removal: str = "",
    pooling: str = "cls",
    norms: list[torch.Tensor] | None = None,
    agreement: dict[str, Any] | None = None,
    review: Review | None = None,
) -> Path:
    """The interactive attention view of one prediction (every layer, head and the rollout; with `norms`, the
    norm-weighted maps too) and, when `explained`, its word attributions with their faithfulness on this text:
    `<folder>/<index>.html`, titled `text_<index>` (the name of the pictures its buttons save), the text under the
    title and, where the model read only part of it (`review`), the cut. `agreement`: each method's tau over
    all the texts explained (mean +- SE), beside this text's."""
    probs = ", ".join(f"{name} {prob:.2f}" for name, prob in pred.probabilities.items())
    words = {}
    if explained is not None:
        k = ", ".join(m.split("@")[1] for m in next(iter(explained.scores.values())) if m.startswith("sufficiency@"))
        words = {
            "attributions": {m: a.tolist() for m, a in explained.attributions.items()},
            "faithfulness": {m: {q: s.get(q) for q in MEASURES} for m, s in explained.scores.items()},
            "faithfulness_note": f"for the class {list(pred.probabilities)[explained.target]}; this text's words "
            f"{removal}; comprehensiveness and sufficiency: the mean over the top {k}% of its words",
            "agreement": agreement,
        }
    return save_attention_html(
        folder / f"{index:04d}.html", pred.tokens, _weights(pred), title=f"text_{index}",
        caption=f"{pred.label} ({probs})", review=review or Review(pred.text, len(pred.tokens)),
        pooling=pooling, method_labels=labels(), method_signed=signed(), text_method=TEXT_METHOD, norms=norms,
        **words,
    )  # fmt: skip


# the page's table, per method
MEASURES = ("comprehensiveness", "sufficiency", "aopc", "naopc", "tau_leave_one_out", "tau_integrated_gradients")
ATTENTION_FORMATS = {False: (), "none": (), True: ("png",), "png": ("png",), "html": ("html",), "both": ("png", "html")}


def attention_formats(value: object) -> tuple[str, ...]:
    """What `save_attention` asks for: () for false/none, ("png",) for true/png, ("html",), or both."""
    key = value.lower() if isinstance(value, str) else value
    if value is None or isinstance(value, bool | str) and key in ATTENTION_FORMATS:
        return ATTENTION_FORMATS.get(key, ())
    raise ConfigError(
        f"save_attention={value!r} is not a choice: use false, true (= png), png, html (an interactive page per "
        "text) or both"
    )


def main(cfg: DictConfig) -> list[Prediction]:
    """Classify the given texts, print them, write predictions.jsonl (and the attention pictures).
    Missing texts (InputError) and an unusable checkpoint (CheckpointError) are raised for the entry
    point's error wrapper to print as one line."""
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
    if not cfg.get("ckpt_path"):
        raise CheckpointError("no checkpoint given: pass ckpt_path=<run>/checkpoints/<name>.ckpt")
    module = load_module(cfg.ckpt_path, map_location=cfg.get("device") or "cpu")
    preds = predict(
        module,
        texts,
        need_weights=bool(formats),
        batch_size=cfg.batch_size,
        max_length=cfg.get("max_length"),
    )
    explained: list[Explained | None] = [None] * len(preds)
    norms: list[list[torch.Tensor] | None] = [None] * len(preds)
    removal, agreement = "", None
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
    run = Path(cfg.paths.output_dir)
    records, pooling = [], module.hparams.get("pooling", "cls")
    for i, p in enumerate(preds):
        record = {**p.to_dict(), "tokens_read": len(p.tokens), "truncated": p.text_tokens > len(p.tokens)}
        if "png" in formats:
            folder = run / "attention"
            drawn, norm = p, norms[i]  # norms: computed for kind=norm
            if kind != "weight" and norm is not None:  # weight x norm, each row's shares
                drawn = replace(p, attentions=[n / n.sum(-1, keepdim=True).clamp(min=1e-12) for n in norm])
            record["attention_png"] = [str(path) for path in save_attention_pngs(drawn, folder, i, pooling, scale)]
            record["rollout_png"] = str(save_rollout_png(drawn, folder, i, pooling=pooling, scale=scale))
            record["text_png"] = str(save_text_png(drawn, folder, i, pooling=pooling, scale=scale))
        if "html" in formats:
            cut = cut_review(p.text, len(p.tokens), tok)
            page = save_attention_page(
                p, run / "attention", i, explained[i], removal, pooling, norms=norms[i], agreement=agreement, review=cut
            )
            record["attention_html"] = str(page)
        records.append(json.dumps(record, ensure_ascii=False) + "\n")
    atomic_write(run / "predictions.jsonl", "".join(records))
    for p in preds:
        probs = "  ".join(f"{name}={prob:.4f}" for name, prob in p.probabilities.items())
        note = read_note(len(p.tokens), p.text_tokens)  # "read 64 of 494 tokens: " where the text was cut
        print(f"{printable(p.label):<12} {printable(probs)}  | {note}{printable(p.text)}")  # names from a file
    print(f"predictions: {shown(run / 'predictions.jsonl')}")
    if formats:
        pages = " (<i>.html: open it in a browser)" if "html" in formats else ""
        print(f"attention maps: {shown(run / 'attention')}{pages}")
    return preds
