"""Classify your own sentences with a checkpoint alone, optionally with every layer's attention.

Python API (the `.ckpt` holds the tokenizer, label names and hyperparameters):

    module = ClassifierModule.load_from_checkpoint("outputs/.../checkpoints/last.ckpt")
    for p in predict(module, ["not bad at all", "a dull, lifeless film"], need_weights=True):
        print(p.label, p.probabilities, p.tokens, p.attentions[0].shape)  # (H, T, T) per layer

`main` is the `python predict.py` task: texts from `text=`, `texts=[...]`, `text_file=` (`-` is
stdin); prints one line per text, writes `predictions.jsonl` and, with `save_attention=true` (or `png`), one
attention PNG per text and layer (every head in its own panel) in the run folder; `save_attention=html`
writes one interactive page per text instead (html_view.py), `both` writes both.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from omegaconf import DictConfig

from .checkpoint import load_module
from .data.tokenizer import PAD_ID, UNK_ID, encode, load_tokenizer
from .errors import CheckpointError, ConfigError, InputError, printable
from .inference import infer
from .module import ClassifierModule

log = logging.getLogger(__name__)


@dataclass
class Prediction:
    """One text's prediction; `attentions` (one (H, T, T) tensor per layer, T = len(tokens)) when asked."""

    text: str
    label: str
    label_id: int
    probabilities: dict[str, float]
    tokens: list[str]
    attentions: list[torch.Tensor] | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        """JSON-ready: everything but the attention tensors."""
        d = asdict(self)
        d.pop("attentions")
        return d


def predict(
    module: ClassifierModule,
    texts: Sequence[str],
    need_weights: bool = False,
    batch_size: int = 64,
    max_length: int | None = None,
) -> list[Prediction]:
    """Classify `texts` with the module's own tokenizer, in eval mode, on the module's device (`infer`).

    Texts are cut to `max_length` tokens: by default the length the model was trained with (kept in
    the checkpoint's tokenizer), at most the model's `max_len`.
    """
    if isinstance(texts, str):
        texts = [texts]
    if not module.tokenizer_json:
        raise ValueError("this module has no tokenizer: load it from a train.py checkpoint")
    hp = module.hparams
    tok = load_tokenizer(module.tokenizer_json)
    trained = (tok.truncation or {}).get("max_length")
    if max_length is None:
        max_length = min(trained or hp.max_len, hp.max_len)
    elif isinstance(max_length, bool) or not isinstance(max_length, int) or not 2 <= max_length <= hp.max_len:
        raise InputError(
            f"max_length={max_length!r} must be a whole number from 2 to {hp.max_len}, the longest input this "
            f"model takes: e.g. max_length={min(trained or hp.max_len, hp.max_len)} (its training length), "
            f"or leave max_length unset"
        )
    names = [str(n) for n in (hp.get("label_names") or range(hp.num_classes))]
    ids = encode(tok, list(texts), max_length)
    unknown = [i for i, row in enumerate(ids) if len(row) > 1 and all(int(t) == UNK_ID for t in row[1:])]
    for i in unknown:  # after [CLS]: the model sees no word it knows, so the prediction says nothing of the text
        log.warning("text %d is all [UNK] tokens (no word of it is in the model's vocabulary): %r", i, texts[i][:80])
    rows = infer(module, ids, pad_id=hp.get("pad_id", PAD_ID), need_weights=need_weights, batch_size=batch_size)
    results = []
    for text, row_ids, row in zip(texts, ids, rows, strict=True):
        k = int(row.probabilities.argmax())
        results.append(
            Prediction(
                text=text,
                label=names[k],
                label_id=k,
                probabilities={n: float(p) for n, p in zip(names, row.probabilities.tolist(), strict=True)},
                tokens=[tok.id_to_token(int(i)) for i in row_ids],
                attentions=row.attentions,  # each (H, T, T), padding cut off
            )
        )
    return results


def read_texts(text: str | None = None, texts: Sequence[str] | None = None, text_file: str | None = None) -> list[str]:
    """All texts given: `text`, then `texts`, then the non-empty lines of `text_file` (`-` = stdin).
    None at all, or a `text_file` that cannot be read, is an InputError."""
    out = ([text] if text else []) + [str(t) for t in (texts or [])]
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


def save_attention_pngs(pred: Prediction, folder: Path, index: int) -> list[Path]:
    """One PNG per layer for one prediction: `<folder>/<index>_layer<l>.png`, a panel per head."""
    from .plotting import save_attention_png

    title = f"{pred.label} ({pred.probabilities[pred.label]:.2f}): {pred.text[:60]}"
    return [
        save_attention_png(
            folder / f"{index:04d}_layer{layer}.png", pred.tokens, weights, title=f"layer {layer} | {title}"
        )
        for layer, weights in enumerate(pred.attentions or [])
    ]


def save_rollout_png(pred: Prediction, folder: Path, index: int, pooling: str = "cls") -> Path:
    """The attention rollout of one prediction (each token's share in the pooled vector, through all layers):
    `<folder>/<index>_rollout.png`."""
    from .plotting import plot_rollout

    path = folder / f"{index:04d}_rollout.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    title = f"{pred.label} ({pred.probabilities[pred.label]:.2f}): {pred.text[:80]} \u00b7 attention rollout"
    plot_rollout(pred.tokens, pred.attentions, title, pooling=pooling).savefig(path, format="png")
    return path


def save_attention_page(pred: Prediction, folder: Path, index: int) -> Path:
    """The interactive attention view of one prediction (every layer, head and the rollout): `<folder>/<index>.html`."""
    from .html_view import save_attention_html

    probs = ", ".join(f"{name} {prob:.2f}" for name, prob in pred.probabilities.items())
    return save_attention_html(
        folder / f"{index:04d}.html", pred.tokens, pred.attentions, title=pred.text, caption=f"{pred.label} ({probs})"
    )


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
    """Hydra task function: classify the given texts, print them, write predictions.jsonl (and PNGs).
    Missing texts (InputError) and an unusable checkpoint (CheckpointError) are raised for the entry
    point's error wrapper to print as one line."""
    formats = attention_formats(cfg.get("save_attention"))
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
    run = Path(cfg.paths.output_dir)
    run.mkdir(parents=True, exist_ok=True)
    with open(run / "predictions.jsonl", "w", encoding="utf-8") as f:
        for i, p in enumerate(preds):
            record = p.to_dict()
            if "png" in formats:
                record["attention_png"] = [str(path) for path in save_attention_pngs(p, run / "attention", i)]
                pooling = module.hparams.get("pooling", "cls")
                record["rollout_png"] = str(save_rollout_png(p, run / "attention", i, pooling=pooling))
            if "html" in formats:
                record["attention_html"] = str(save_attention_page(p, run / "attention", i))
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    for p in preds:
        probs = "  ".join(f"{name}={prob:.4f}" for name, prob in p.probabilities.items())
        print(f"{printable(p.label):<12} {printable(probs)}  | {printable(p.text)}")  # names from a file
    print(f"predictions: {run / 'predictions.jsonl'}")
    if formats:
        pages = " (<i>.html: open it in a browser)" if "html" in formats else ""
        print(f"attention maps: {run / 'attention'}{pages}")
    return preds
