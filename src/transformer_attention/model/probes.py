"""What the analyses read from a model beyond its attention weights, through forward hooks, so that `forward`
stays the tutorial's: heads switched off or scaled (`gated_heads`) and the norm-weighted maps
(`norm_weighted_forward`). Each works on any module holding MultiHeadAttention layers (a TransformerClassifier,
a LightningModule around one), its layers in the order they run.

Shapes: B batch, L attention layers, H heads, Tq query tokens, Tk key tokens, D d_model, Dk head dim.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from .attention import MultiHeadAttention
from .classifier import ClassifierOutput


def attention_layers(model: nn.Module) -> list[MultiHeadAttention]:
    """Every MultiHeadAttention inside `model`, in the order they were registered (the encoder's layer order)."""
    return [m for m in model.modules() if isinstance(m, MultiHeadAttention)]


@contextmanager
def gated_heads(model: nn.Module, gates: torch.Tensor) -> Iterator[None]:
    """Inside the block, head h of attention layer l of `model` has its output multiplied by `gates[..., l, h]`
    before the heads are merged by W_O: 1 keeps the head, 0 removes it (Michel et al. 2019), and a float gate
    with `requires_grad` gives d loss / d gate. `gates`: (L, H) for every row, or (B, L, H), one per row."""
    layers = attention_layers(model)
    L, H = len(layers), layers[0].num_heads if layers else 0
    if gates.dim() not in (2, 3) or tuple(gates.shape[-2:]) != (L, H):
        raise ValueError(
            f"head gates of shape {tuple(gates.shape)} do not fit {L} layers of {H} heads: expected (L, H)={(L, H)} "
            f"or (B, L, H)"
        )
    handles = [
        mha.w_o.register_forward_pre_hook(_HeadGate(gates[..., layer, :]))  # (H,) or (B, H)
        for layer, mha in enumerate(layers)
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


class _HeadGate:
    """A forward pre-hook on W_O: its input (B, Tq, H * Dk) holds the heads side by side; scale each head's slice."""

    def __init__(self, gates: torch.Tensor) -> None:
        self.gates = gates  # (H,) or (B, H)

    def __call__(self, module: nn.Module, args: tuple[Any, ...]) -> tuple[torch.Tensor]:
        (x,) = args  # (B, Tq, H * Dk)
        B, Tq, D = x.shape
        H = self.gates.shape[-1]
        if self.gates.dim() == 2 and self.gates.shape[0] not in (1, B):
            raise ValueError(
                f"head gates for {self.gates.shape[0]} rows given to a batch of {B}: give (L, H) or (B, L, H)"
            )
        gates = self.gates.reshape(-1, 1, H, 1).to(device=x.device, dtype=x.dtype)  # (B|1, 1, H, 1)
        return ((x.reshape(B, Tq, H, D // H) * gates).reshape(B, Tq, D),)  # (B, Tq, H * Dk)


def head_moves(values: torch.Tensor, mha: MultiHeadAttention) -> torch.Tensor:
    """f_h(x_j): what head h moves from key j, each head's slice of the values (B, Tk, D) through its slice of
    W_O (no output bias: it is added once, not per key); returns (B, H, Tk, D) in the values' dtype."""
    v = mha.split_heads(values)  # (B, H, Tk, Dk)
    w_o = mha.w_o.weight.to(values.dtype)  # (D, H * Dk)
    per_head = w_o.view(w_o.shape[0], mha.num_heads, mha.d_k).permute(1, 2, 0)  # (H, Dk, D): head h's columns
    moved: torch.Tensor = torch.einsum("bhtk,hkd->bhtd", v, per_head)
    return moved


def weighted_norms(weights: torch.Tensor, values: torch.Tensor, mha: MultiHeadAttention) -> torch.Tensor:
    """||alpha_ij f_h(x_j)|| (Kobayashi et al. 2020, "Attention is Not Only a Weight"): the length of what key j
    moves into query i through head h, f_h(x) = (x W_V + b_V) W_O restricted to head h's slice of W_O (the
    output bias is added once, not per key). weights (B, H, Tq, Tk), values (B, Tk, D) as `mha.w_v` gave them;
    returns (B, H, Tq, Tk)."""
    moved = head_moves(values, mha)  # (B, H, Tk, D): f_h(x_j)
    lengths = torch.linalg.vector_norm(moved, dim=-1)  # (B, H, Tk): ||f_h(x_j)||
    norms: torch.Tensor = weights * lengths.unsqueeze(-2)  # (B, H, Tq, Tk): alpha_ij >= 0: ||alpha f|| = alpha ||f||
    return norms


def norm_weighted_forward(model: nn.Module, *args: Any, **kwargs: Any) -> ClassifierOutput:
    """`model(*args, need_weights=True, **kwargs)` with each layer's weights replaced by its norm-weighted map
    (`weighted_norms`): the value vectors each layer computed are read by a hook on its `w_v`."""
    layers = attention_layers(model)
    values: dict[MultiHeadAttention, torch.Tensor] = {}

    def keep(mha: MultiHeadAttention) -> Any:
        return lambda module, inputs, output: values.__setitem__(mha, output)  # (B, Tk, D)

    handles = [mha.w_v.register_forward_hook(keep(mha)) for mha in layers]
    try:
        logits, weights = model(*args, need_weights=True, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    maps = [weighted_norms(w, values[mha], mha) for w, mha in zip(weights, layers, strict=True)]
    return ClassifierOutput(logits, maps)
