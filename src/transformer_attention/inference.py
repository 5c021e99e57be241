"""One forward pass: token-id rows padded into batches on the model's device (`batched`), each through the model
in eval mode (`forward`, the one place that calls it; every submodule's mode restored after, even on an error),
with or without every layer's attention (weights, or norm-weighted maps), a head mask and gradients; on it
`infer`, `probabilities`, `logit_function` (what captum calls) and `predict(module, texts)`:

    module = ClassifierModule.load_from_checkpoint("outputs/.../checkpoints/last.ckpt")
    for p in predict(module, ["not bad at all", "a dull, lifeless film"], need_weights=True):
        print(p.label, p.probabilities, p.tokens, p.attentions[0].shape)  # (H, T, T) per layer

Shapes: N rows, B a batch, T its longest row, C classes, L layers, H heads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn

from .checks import is_whole
from .data.batches import collate
from .data.labels import names_or_ids
from .data.tokenizer import PAD_ID, UNK_ID, encode, load_tokenizer
from .errors import InputError
from .model.classifier import ClassifierOutput, TransformerClassifier
from .model.evidence import share_of_margin
from .model.probes import gated_heads, norm_weighted_forward
from .module import ClassifierModule, evaluating

log = logging.getLogger(__name__)
TokenRow = Sequence[int] | np.ndarray  # one text's token ids, [CLS] first: a list, or the tokenizer's int32 array


@dataclass(frozen=True)
class Batch:
    """Rows of token ids padded to the longest of them, on the model's device, and which rows they are."""

    index: list[int]  # each row's position in the rows `batched` was given
    ids: torch.Tensor  # (B, T) long
    mask: torch.Tensor  # (B, T) bool, True = a real token
    labels: torch.Tensor | None = None  # (B,) long, when given


def device_of(model: nn.Module) -> torch.device:
    """The device `model`'s parameters are on."""
    return next(model.parameters()).device


def pad_id_of(model: nn.Module) -> int:
    """The id `model` pads with: a TransformerClassifier's, or that of the one a module holds as `.net`."""
    return getattr(getattr(model, "net", model), "pad_id", PAD_ID)


def batched(
    model: nn.Module,
    rows: Sequence[TokenRow],
    *,
    batch_size: int | None = None,
    by_length: bool = False,
    labels: Sequence[int] | None = None,
    pad_id: int | None = None,
) -> list[Batch]:
    """`rows` in padded batches of `batch_size` (None: all in one) on `model`'s device, padded with its pad id
    (or `pad_id`): in their order, or shortest first (`by_length`) so that a batch pads little."""
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1 (or None: all rows in one batch)")
    device = device_of(model)
    pad = pad_id_of(model) if pad_id is None else pad_id
    order = sorted(range(len(rows)), key=lambda i: (len(rows[i]), i)) if by_length else list(range(len(rows)))
    step = batch_size or max(len(rows), 1)
    out = []
    for start in range(0, len(order), step):
        index = order[start : start + step]
        items = [{"input_ids": rows[i], "labels": 0 if labels is None else int(labels[i])} for i in index]
        batch = collate(items, pad_id=pad)
        ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)  # (B, T)
        given = None if labels is None else batch["labels"].to(device)  # (B,)
        out.append(Batch(index=index, ids=ids, mask=mask, labels=given))
    return out


def forward(
    model: nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    *,
    need_weights: bool = False,
    head_mask: torch.Tensor | None = None,
    grad: bool | None = False,
    need_norms: bool = False,
) -> ClassifierOutput:
    """`model(ids, mask)` in eval mode, every submodule's mode restored after (a model already all in eval mode,
    as `evaluating` holds the analyses', is left as it is: saving and restoring each mode cost more than the
    forward pass of a small batch). `grad`: build the graph for gradients (True), not (False), or as the caller's
    grad mode is (None: what captum sets). `head_mask` (L, H) or (B, L, H): each head's output scaled by its
    gate (`model.probes.gated_heads`). `need_norms`: the attentions are the norm-weighted maps
    (`model.probes.norm_weighted_forward`)."""
    modes = evaluating(model) if any(m.training for m in model.modules()) else nullcontext()
    gates = nullcontext() if head_mask is None else gated_heads(model, head_mask)
    with modes, gates, torch.set_grad_enabled(torch.is_grad_enabled() if grad is None else grad):
        if need_norms:
            return norm_weighted_forward(model, ids, mask)
        return model(ids, mask, need_weights=need_weights)


def evidence_share(
    net: TransformerClassifier, ids: torch.Tensor, mask: torch.Tensor, target: torch.Tensor
) -> torch.Tensor:
    """(B,): how much of each row's margin for its `target` class the naive-Bayes n-gram term carries against the
    encoder's (`model.evidence.share_of_margin`), in eval mode, no gradient; `net` has that term."""
    modes = evaluating(net) if any(m.training for m in net.modules()) else nullcontext()
    with modes, torch.no_grad():
        encoder, evidence, _ = net.logit_parts(ids, mask)
    assert evidence is not None, "the model has no naive-Bayes n-gram term (model.nb_ngram_max=0)"
    return share_of_margin(encoder, evidence, target)


def forward_batches(
    model: nn.Module,
    batches: Iterable[Batch],
    *,
    need_weights: bool = False,
    head_mask: torch.Tensor | None = None,
    grad: bool = False,
    need_norms: bool = False,
) -> Iterator[tuple[Batch, ClassifierOutput]]:
    """Each batch and what `forward` gives for it, in turn. `head_mask`: (L, H) for every row, or (N, L, H), one
    per row of what `batched` was given (1 keeps a head, 0 masks its output)."""
    asked = {"need_weights": need_weights, "grad": grad, "need_norms": need_norms}
    for batch in batches:
        gates = None if head_mask is None else head_mask.to(batch.ids.device)
        if gates is not None and gates.dim() == 3:
            gates = gates[batch.index]  # (B, L, H): this batch's rows
        yield batch, forward(model, batch.ids, batch.mask, head_mask=gates, **asked)


def logit_function(model: nn.Module) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """`(ids, mask) -> (B, C) logits` through `forward`, the grad mode left to the caller: what captum's layer
    attributions call (they take gradients on the token embedding)."""
    return lambda ids, mask: forward(model, ids, mask, grad=None).logits


def probabilities(
    model: nn.Module, rows: Sequence[TokenRow], *, batch_size: int, head_mask: torch.Tensor | None = None
) -> np.ndarray:
    """(N, C) float64: the softmax of the model's logits for each row, in the rows' order (the shortest batched
    together); `head_mask` (L, H) as `forward_batches` takes it."""
    out: np.ndarray | None = None
    data = batched(model, rows, batch_size=batch_size, by_length=True)
    for batch, result in forward_batches(model, data, head_mask=head_mask):
        probs = result.logits.cpu().double().softmax(dim=-1).numpy()  # (B, C): float64 on the CPU (MPS has none)
        if out is None:
            out = np.empty((len(rows), probs.shape[1]))
        out[batch.index] = probs
    return np.empty((0, 0)) if out is None else out


@dataclass(frozen=True)
class RowOutput:
    """What the model gives for one row, on the CPU, in float32 (C classes, T the row's real tokens)."""

    logits: torch.Tensor  # (C,)
    probabilities: torch.Tensor  # (C,), softmax of the logits
    attentions: list[torch.Tensor] | None = field(default=None, repr=False)  # one (H, T, T) per layer


def infer(
    model: nn.Module,
    ids: Sequence[TokenRow],
    *,
    pad_id: int | None = None,
    need_weights: bool = False,
    batch_size: int | None = None,
    need_norms: bool = False,
) -> list[RowOutput]:
    """Run `model` (a ClassifierModule or TransformerClassifier: `model(ids, mask, need_weights=...)` returning
    `(logits, attentions)`) on `ids`, `batch_size` rows at a time (None: all at once), each batch padded with
    `pad_id` (None: the model's) to its longest row and masked; one RowOutput per row, in order (`need_norms`:
    its attentions are the norm-weighted maps)."""
    results: list[RowOutput] = []
    data = batched(model, ids, batch_size=batch_size, pad_id=pad_id)
    maps = need_weights or need_norms
    for batch, out in forward_batches(model, data, need_weights=need_weights, need_norms=need_norms):
        logits = out.logits.float().cpu()  # (B, C)
        probs = logits.softmax(dim=-1)  # (B, C)
        layers = [a.float().cpu() for a in out.attentions or []]  # each (B, H, T, T); there when asked
        for b, i in enumerate(batch.index):
            T = len(ids[i])  # real tokens: the batch's padding is cut off
            attentions = [a[b, :, :T, :T] for a in layers] if maps else None  # each (H, T, T)
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
    text_tokens: int = 0  # the tokens of the whole text: more than len(tokens) when it was cut to max_length
    attentions: list[torch.Tensor] | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        """JSON-ready: everything but the attention tensors."""
        d = asdict(self)
        d.pop("attentions")
        return d


def trained_length(module: ClassifierModule) -> int:
    """The tokens a text the model was trained with (its checkpoint's data settings, else its tokenizer's cut),
    at most the longest input it takes (`max_len`)."""
    longest = int(module.hparams["max_len"])
    trained = (module.data_settings or {}).get("max_length")
    if trained is None and module.tokenizer_json:
        trained = (load_tokenizer(module.tokenizer_json).truncation or {}).get("max_length")
    return min(int(trained or longest), longest)


def predict(
    module: ClassifierModule,
    texts: Sequence[str],
    need_weights: bool = False,
    batch_size: int = 64,
    max_length: int | None = None,
    need_norms: bool = False,
) -> list[Prediction]:
    """Classify `texts` with the module's own tokenizer, in eval mode, on the module's device (`infer`);
    `need_norms`: `attentions` holds the norm-weighted maps ||alpha_ij f(x_j)|| instead of the weights.
    Texts are cut to `max_length` tokens: by default the length the model was trained with (kept in
    the checkpoint's tokenizer), at most the model's `max_len`; `text_tokens` says how many the whole text has."""
    if isinstance(texts, str):
        texts = [texts]
    if not module.tokenizer_json:
        raise ValueError("this module has no tokenizer: load it from a train.py checkpoint")
    hp = module.hparams
    longest, trained = int(hp["max_len"]), trained_length(module)
    tok = load_tokenizer(module.tokenizer_json)
    if max_length is None:
        max_length = trained
    elif not is_whole(max_length, 2) or max_length > longest:
        raise InputError(
            f"max_length={max_length!r} must be a whole number from 2 to {longest}, the longest input this "
            f"model takes: e.g. max_length={trained} (its training length), or leave max_length unset"
        )
    names = names_or_ids(hp.get("label_names"), int(hp["num_classes"]))
    ids = encode(tok, list(texts), max_length)
    unknown = [i for i, row in enumerate(ids) if len(row) > 1 and all(int(t) == UNK_ID for t in row[1:])]
    for i in unknown:  # after [CLS]: the model sees no word it knows, so the prediction says nothing of the text
        log.warning("text %d is all [UNK] tokens (no word of it is in the model's vocabulary): %r", i, texts[i][:80])
    rows = infer(module, ids, need_weights=need_weights, batch_size=batch_size, need_norms=need_norms)
    tok.no_truncation()  # each whole text's tokens too: a text cut to max_length says so wherever it is shown
    results = []
    for text, row_ids, row, whole in zip(texts, ids, rows, tok.encode_batch(list(texts)), strict=True):
        k = int(row.probabilities.argmax())
        results.append(
            Prediction(
                text=text,
                label=names[k],
                label_id=k,
                probabilities={n: float(p) for n, p in zip(names, row.probabilities.tolist(), strict=True)},
                tokens=[tok.id_to_token(int(i)) or "[UNK]" for i in row_ids],
                text_tokens=len(whole.ids),
                attentions=row.attentions,  # each (H, T, T), padding cut off
            )
        )
    return results
