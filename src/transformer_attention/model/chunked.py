"""Attention tile by tile, with an online softmax and a hand-written backward (FlashAttention on plain
tensor ops): `chunked_attention`, the kernel of `attention_impl="chunked"`.

It computes what attention.py's `scaled_dot_product_attention` does (tested equal, outputs and gradients) but
returns only the output: no Tq x Tk tensor exists in forward or backward, so memory stays linear in T. It pays
where torch's fused kernel cannot run fused: dropout on the attention weights (docs/performance.md).

Shapes: B batch, H heads, Tq query tokens, Tk key tokens, Dk head dim; bb / bq / bk the batch,
query and key block lengths. Masks: True = attend.
"""

from __future__ import annotations

from typing import Any

import torch

from .dropout import check_dropout_p, dropout_threshold, keep_mask
from .masks import dead_rows_if_any, expand_mask

# elements in one (bb, H, bq, bk) score tile of the chunked path: 4 MiB in fp32, so a tile and
# its temporaries stay in cache and under glibc's 32 MiB mmap threshold (no page-fault storms)
TILE_ELEMENTS = 1 << 20


def chunked_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    block_q: int | None = None,
    block_k: int | None = None,
) -> torch.Tensor:
    """Attention over (batch rows x query block x key block) tiles with an online softmax.

    q (B, H, Tq, Dk), k and v (B, H, Tk, Dk) -> out (B, H, Tq, Dk). No Tq x Tk tensor exists in
    forward or backward. Rows with no key give zeros. `dropout_p` drops weights (0 outside training).
    """
    check_dropout_p(dropout_p)
    B, H, Tq, _ = q.shape
    Tk = k.shape[-2]
    mask = expand_mask(mask, B, Tq, Tk)  # (B|1, H|1, Tq|1, Tk)
    bias, dead = _open_bias(mask, torch.promote_types(q.dtype, torch.float32))
    blocks = _block_sizes(B=B, H=H, Tq=Tq, Tk=Tk, block_q=block_q, block_k=block_k)
    # torch types Function.apply as untyped: the forward below says what it returns
    out: torch.Tensor = _ChunkedAttention.apply(q, k, v, bias, float(dropout_p), blocks)  # type: ignore[no-untyped-call]
    return out if dead is None else out.masked_fill(dead, 0.0)  # (B, H, Tq, Dk)


def _open_bias(mask: torch.Tensor | None, dtype: torch.dtype) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """An additive score bias (0 = attend, -inf = masked) and the dead rows of an expanded mask (None: none).

    Dead rows (queries with no key at all) are opened in the bias, so no softmax sees a row of
    only -inf (NaN); the caller zeroes their outputs afterwards, which also zeroes their gradients.
    """
    if mask is None:
        return None, None
    dead = dead_rows_if_any(mask)  # (B|1, H|1, Tq|1, 1), or None: no such row
    bias = torch.full(mask.shape, float("-inf"), dtype=dtype, device=mask.device)
    return bias.masked_fill_(mask if dead is None else mask | dead, 0.0), dead  # (B|1, H|1, Tq|1, Tk)


def _block_sizes(B: int, H: int, Tq: int, Tk: int, block_q: int | None, block_k: int | None) -> tuple[int, int, int]:
    """(batch rows, query rows, key rows) per tile: key blocks up to 512, query blocks up to 128,
    then as many batch rows as fit in TILE_ELEMENTS (fewer query rows when one does not fit)."""
    bk = min(Tk, block_k or 512)
    bq = min(Tq, block_q or 128)
    if block_q is None and H * bq * bk > TILE_ELEMENTS:
        bq = min(Tq, max(16, TILE_ELEMENTS // (H * bk)))
    bb = min(B, max(1, TILE_ELEMENTS // (H * bq * bk)))
    return bb, bq, bk


def _spans(T: int, block: int) -> list[tuple[int, int]]:
    return [(start, min(start + block, T)) for start in range(0, T, block)]


def _tile(x: torch.Tensor | None, b: tuple[int, int], i: tuple[int, int], j: tuple[int, int]) -> torch.Tensor | None:
    """The (batch b, query rows i, key rows j) tile of a (B|1, H|1, Tq|1, Tk) tensor; dims of 1 broadcast."""
    if x is None:
        return None
    return x[slice(*b) if x.shape[0] > 1 else slice(None), :, slice(*i) if x.shape[-2] > 1 else slice(None), slice(*j)]


def _scores(q_i: torch.Tensor, k_j: torch.Tensor, bias_ij: torch.Tensor | None, acc_dtype: torch.dtype) -> torch.Tensor:
    """One (bb, H, bq, bk) tile of the biased scores, in the accumulation dtype."""
    s = (q_i @ k_j.transpose(-2, -1)).to(acc_dtype)  # q is pre-scaled by 1 / sqrt(Dk)
    return s if bias_ij is None else s.add_(bias_ij)


def _generator(device: torch.device, seed: int) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


class _ChunkedAttention(torch.autograd.Function):
    """Tiled attention with an online softmax over key blocks. Backward recomputes each score
    tile from Q, K and the saved row log-sum-exp instead of storing the weights, so memory
    stays linear in T in both directions (FlashAttention, Dao et al. 2022, on plain tensor ops).

    Every row of `bias` must have a key it may attend to (_open_bias opens dead rows).
    Dropout on the weights is drawn per tile from a generator seeded once per call (from torch's
    global RNG, so torch.manual_seed rules); backward replays the seed in the same tile order,
    so it sees the same dropout masks.
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        bias: torch.Tensor | None,
        dropout_p: float,
        blocks: tuple[int, int, int],
    ) -> torch.Tensor:
        B, H, Tq, Dk = q.shape
        acc_dtype = torch.promote_types(q.dtype, torch.float32)  # softmax statistics: fp32 or better
        q = (q * Dk**-0.5).contiguous()  # (B, H, Tq, Dk): scaled once; contiguous, so tiles fold into bmm
        k, v = k.contiguous(), v.contiguous()  # (B, H, Tk, Dk)
        # written in (B, Tq, H, Dk) layout: merging the heads afterwards is a free view
        out = q.new_empty(B, Tq, H, Dk).transpose(1, 2)  # (B, H, Tq, Dk)
        lse = q.new_empty(B, H, Tq, 1, dtype=acc_dtype)  # log-sum-exp of each row's scores
        seed = int(torch.randint(0, 2**62, (1,))) if dropout_p > 0 else 0
        gen = _generator(q.device, seed) if dropout_p > 0 else None
        threshold, keep_scale = dropout_threshold(dropout_p)  # masks from half the random numbers
        bb, bq, bk = blocks
        for b in _spans(B, bb):
            for i in _spans(Tq, bq):
                q_i = q[slice(*b), :, slice(*i)]  # (bb, H, bq, Dk)
                row_max: torch.Tensor | None = None  # each row's largest score so far, (bb, H, bq, 1)
                row_sum: torch.Tensor | None = None  # its sum of exp(score - row_max), (bb, H, bq, 1)
                acc: torch.Tensor | None = None  # its weighted sum of values, (bb, H, bq, Dk)
                for j in _spans(k.shape[-2], bk):
                    v_j = v[slice(*b), :, slice(*j)]  # (bb, H, bk, Dk)
                    s = _scores(q_i, k[slice(*b), :, slice(*j)], _tile(bias, b, i, j), acc_dtype)
                    new_max = s.amax(dim=-1, keepdim=True)  # (bb, H, bq, 1)
                    if row_max is not None:
                        new_max = torch.maximum(row_max, new_max)
                    # a row with no visible key in the blocks so far: shift by 0, not by -inf
                    shift = new_max.masked_fill(new_max == float("-inf"), 0.0)
                    p = s.sub_(shift).exp_()  # (bb, H, bq, bk) unnormalised weights
                    p_sum = p.sum(dim=-1, keepdim=True)
                    if gen is not None:
                        p.mul_(keep_mask(p.shape, threshold, gen))  # dropout after the row sum ...
                    pv = (p.to(v.dtype) @ v_j).to(acc_dtype)  # (bb, H, bq, Dk)
                    if gen is not None:
                        pv.mul_(keep_scale)  # ... and its 1 / (1 - p) on the small side
                    if row_max is None or row_sum is None or acc is None:  # the first key block
                        row_sum, acc = p_sum, pv
                    else:
                        rescale = torch.exp(row_max - shift)  # what was summed under the old max
                        row_sum = row_sum * rescale + p_sum
                        acc = acc * rescale + pv
                    row_max = new_max
                assert row_max is not None and row_sum is not None and acc is not None  # Tk >= 1: a key block ran
                out[slice(*b), :, slice(*i)] = acc / row_sum
                lse[slice(*b), :, slice(*i)] = row_max + row_sum.log()
        ctx.save_for_backward(q, k, v, out, lse, bias)
        ctx.dropout_p, ctx.seed, ctx.blocks = dropout_p, seed, blocks
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, lse, bias = ctx.saved_tensors
        B, H, Tq, Dk = q.shape
        Tk = k.shape[-2]
        acc_dtype = lse.dtype
        grad_out = grad_out.contiguous()  # (B, H, Tq, Dk)
        # the softmax backward's row term: sum_j P_ij dP_ij = rowsum(dO * O)
        delta = (grad_out.to(acc_dtype) * out).sum(dim=-1, keepdim=True)  # (B, H, Tq, 1)
        # gradients laid out as (B, T, H, Dk), like the projections they flow back into
        dq = q.new_zeros(B, Tq, H, Dk, dtype=acc_dtype).transpose(1, 2)  # (B, H, Tq, Dk)
        dk = q.new_zeros(B, Tk, H, Dk, dtype=acc_dtype).transpose(1, 2)  # (B, H, Tk, Dk)
        dv = q.new_zeros(B, Tk, H, Dk, dtype=acc_dtype).transpose(1, 2)  # (B, H, Tk, Dk)
        gen = _generator(q.device, ctx.seed) if ctx.dropout_p > 0 else None
        threshold, keep_scale = dropout_threshold(ctx.dropout_p)
        bb, bq, bk = ctx.blocks
        for b in _spans(B, bb):
            for i in _spans(Tq, bq):
                bi = (slice(*b), slice(None), slice(*i))
                q_i, do_i = q[bi], grad_out[bi]  # (bb, H, bq, Dk)
                if gen is not None:
                    do_i = do_i * keep_scale  # dropout's 1 / (1 - p), folded into dO
                for j in _spans(Tk, bk):
                    bj = (slice(*b), slice(None), slice(*j))
                    k_j, v_j = k[bj], v[bj]  # (bb, H, bk, Dk)
                    s = _scores(q_i, k_j, _tile(bias, b, i, j), acc_dtype)
                    p = s.sub_(lse[bi]).exp_()  # the forward's normalised weights, recomputed
                    dp = (do_i @ v_j.transpose(-2, -1)).to(acc_dtype)  # (bb, H, bq, bk)
                    p_drop = p
                    if gen is not None:
                        keep = keep_mask(p.shape, threshold, gen)  # the forward's mask, replayed
                        p_drop = p * keep
                        dp.mul_(keep)
                    dv[bj] += p_drop.to(v.dtype).transpose(-2, -1) @ do_i  # (bb, H, bk, Dk)
                    ds = dp.sub_(delta[bi]).mul_(p).to(q.dtype)  # dS = P * (dP - D)
                    dq[bi] += ds @ k_j  # (bb, H, bq, Dk)
                    dk[bj] += ds.transpose(-2, -1) @ q_i  # (bb, H, bk, Dk); q_i is pre-scaled
        dq = dq.mul_(Dk**-0.5)  # the forward scaled q by 1 / sqrt(Dk) before Q K^T
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None
