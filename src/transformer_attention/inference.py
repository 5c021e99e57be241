"""One inference path: token-id rows in; each row's logits, probabilities and, when asked, every
layer's attention out (`infer`); and on it, `predict(module, texts)`, what a checkpoint says of your own texts.
`predict` and `AttentionMapLogger` both run the model through `infer`.

    module = ClassifierModule.load_from_checkpoint("outputs/.../checkpoints/last.ckpt")
    for p in predict(module, ["not bad at all", "a dull, lifeless film"], need_weights=True):
        print(p.label, p.probabilities, p.tokens, p.attentions[0].shape)  # (H, T, T) per layer


The model runs in eval mode (no dropout: the attention it returns is what it computed) and without
gradients, on its own device; afterwards every submodule is back in the mode it was in, frozen
(eval-mode) parts of a training model included, even when the forward raises.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from .checks import is_whole
from .data.batches import collate
from .data.labels import names_or_ids
from .data.tokenizer import PAD_ID, UNK_ID, encode, load_tokenizer
from .errors import InputError
from .module import ClassifierModule, evaluating

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RowOutput:
    """What the model gives for one row, on the CPU, in float32 (C classes, T the row's real tokens)."""

    logits: torch.Tensor  # (C,)
    probabilities: torch.Tensor  # (C,), softmax of the logits
    attentions: list[torch.Tensor] | None = field(default=None, repr=False)  # one (H, T, T) per layer


def infer(
    model: nn.Module,
    ids: Sequence[Sequence[int]],
    *,
    pad_id: int = PAD_ID,
    need_weights: bool = False,
    batch_size: int | None = None,
) -> list[RowOutput]:
    """Run `model` (a ClassifierModule or TransformerClassifier: `model(ids, mask, need_weights=...)`
    returning `(logits, attentions)`) on `ids`, `batch_size` rows at a time (None: all at once), each
    batch padded with `pad_id` to its longest row and masked; one RowOutput per row, in order."""
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1 (or None: all rows in one batch)")
    with evaluating(model), torch.no_grad():  # every submodule's mode restored, frozen parts included
        step = batch_size or max(len(ids), 1)
        results: list[RowOutput] = []
        for start in range(0, len(ids), step):
            results += _batch(model, ids[start : start + step], pad_id=pad_id, need_weights=need_weights)
        return results


def _batch(model: nn.Module, rows: Sequence[Sequence[int]], *, pad_id: int, need_weights: bool) -> list[RowOutput]:
    """One padded batch through the model, split back into rows."""
    device = next(model.parameters()).device
    batch = collate([{"input_ids": row, "labels": 0} for row in rows], pad_id=pad_id)
    out = model(batch["input_ids"].to(device), batch["attention_mask"].to(device), need_weights=need_weights)
    logits = out.logits.float().cpu()  # (B, C)
    probs = logits.softmax(dim=-1)  # (B, C)
    layers = [a.float().cpu() for a in out.attentions] if need_weights else []  # each (B, H, T, T)
    results = []
    for b, row in enumerate(rows):
        T = len(row)  # real tokens: the batch's padding is cut off
        attentions = [a[b, :, :T, :T] for a in layers] if need_weights else None  # each (H, T, T)
        results.append(RowOutput(logits=logits[b], probabilities=probs[b], attentions=attentions))
    return results


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
    elif not is_whole(max_length, 2) or max_length > hp.max_len:
        raise InputError(
            f"max_length={max_length!r} must be a whole number from 2 to {hp.max_len}, the longest input this "
            f"model takes: e.g. max_length={min(trained or hp.max_len, hp.max_len)} (its training length), "
            f"or leave max_length unset"
        )
    names = names_or_ids(hp.get("label_names"), hp.num_classes)
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
