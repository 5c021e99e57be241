"""Scaled dot-product and multi-head attention, from scratch.

Shapes: B batch, H heads, Tq query tokens, Tk key tokens, D d_model, Dk head dim (D // H),
bq / bk the query / key block lengths of the chunked path.
Masks are boolean and True means "take part in attention" everywhere in this project.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .dropout import dropout_threshold, keep_mask

ATTENTION_IMPLS = ("math", "sdpa", "chunked")
# elements in one (B, H, bq, bk) score tile of the chunked path: 4 MiB in fp32, so a tile and
# its temporaries stay in cache and under glibc's 32 MiB mmap threshold (no page-fault storms)
TILE_ELEMENTS = 1 << 20


def padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(B, T) bool mask, True where `ids` is a real token (not `pad_id`)."""
    return ids != pad_id


def causal_mask(T: int, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) bool mask, lower triangle True: query i sees keys 0..i."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def expand_mask(mask: torch.Tensor | None, B: int, Tq: int, Tk: int) -> torch.Tensor | None:
    """Bring a (B, Tk), (B, Tq, Tk), (Tq, Tk) or (B, H|1, Tq, Tk) mask to a 4-d broadcastable shape."""
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = attend), got dtype {mask.dtype}")
    shape = tuple(mask.shape)
    # a 2-d mask is read as (B, Tk) padding when it fits; when B == Tq pass a shared
    # (Tq, Tk) mask as (1, Tq, Tk) to say which one it is
    if mask.dim() == 2 and shape == (B, Tk):
        return mask[:, None, None, :]  # (B, 1, 1, Tk)
    if mask.dim() == 2 and shape == (Tq, Tk):
        return mask[None, None, :, :]  # (1, 1, Tq, Tk)
    if mask.dim() == 3 and shape[1:] == (Tq, Tk) and shape[0] in (1, B):
        return mask[:, None, :, :]  # (B, 1, Tq, Tk)
    if mask.dim() == 4 and all(m in (1, n) for m, n in zip(shape, (B, shape[1], Tq, Tk), strict=True)):
        return mask  # already broadcastable to (B, H, Tq, Tk)
    raise ValueError(
        f"mask of shape {shape} does not fit attention with B={B}, Tq={Tq}, Tk={Tk}: expected "
        f"(B, Tk)={(B, Tk)}, (B, Tq, Tk)={(B, Tq, Tk)}, (Tq, Tk)={(Tq, Tk)} or (B, H, Tq, Tk)"
    )


def attend_bias(mask4: torch.Tensor | None, dtype: torch.dtype) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """An additive score bias (0 = attend, -inf = masked) and the dead rows of an expanded mask.

    Dead rows, (B|1, H|1, Tq|1, 1) True where a query may attend to no key at all, are opened
    in the bias (every key 0), so no softmax ever sees a row of only -inf (NaN); the paths zero
    those rows' outputs afterwards, which also zeroes their gradients. Adding a broadcast bias
    costs about an eighth of `masked_fill_` with a broadcast bool mask on this CPU.
    """
    if mask4 is None:
        return None, None
    dead = ~mask4.any(dim=-1, keepdim=True)
    bias = torch.full(mask4.shape, float("-inf"), dtype=dtype, device=mask4.device)
    return bias.masked_fill_(mask4 | dead, 0.0), dead  # (B|1, H|1, Tq|1, Tk), (.., 1)


# ---- math: softmax(Q K^T / sqrt(Dk)) V, the from-scratch reference ---------------------------
def _math_attention(q, k, v, mask4, dropout, zero_weights: bool):
    """The math path on an expanded mask. Rows with no key get a zero output, and zero weights
    when `zero_weights` (only the returned weights need it; the output is zeroed either way)."""
    scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)  # (B, H, Tq, Tk); scale the smaller side
    bias, dead = attend_bias(mask4, scores.dtype)
    if bias is not None:
        scores.add_(bias)  # in place: matmul's backward does not need its output
    weights = scores.softmax(dim=-1)  # masked keys: exp(-inf) == 0 exactly
    if zero_weights and dead is not None:
        weights = weights.masked_fill(dead, 0.0)  # a row with no key: uniform -> zero weights
    p, keep_scale = weights, 1.0
    if isinstance(dropout, nn.Module):
        p = dropout(weights)
    elif dropout:
        threshold, keep_scale = dropout_threshold(dropout)
        p = weights * keep_mask(weights.shape, threshold, device=weights.device)
    out = p @ v  # (B, H, Tq, Dk)
    if keep_scale != 1.0:
        out = out * keep_scale  # dropout's 1 / (1 - p), on the (.., Tq, Dk) side rather than T x T
    if dead is not None and not zero_weights:
        out = out.masked_fill(dead, 0.0)  # (B, H, Tq, Dk): cheaper than zeroing the T x T weights
    return out, weights


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: nn.Module | float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(Dk)) V with a True-means-attend mask.

    q (B, H, Tq, Dk), k and v (B, H, Tk, Dk); returns out (B, H, Tq, Dk) and the weights
    (B, H, Tq, Tk) before dropout. A query whose keys are all masked gets zero weights and output.
    """
    mask4 = expand_mask(mask, q.shape[0], q.shape[-2], k.shape[-2])
    return _math_attention(q, k, v, mask4, dropout, zero_weights=True)


# ---- chunked: the same attention tile by tile, FlashAttention-style --------------------------
def _block_sizes(B: int, H: int, Tq: int, Tk: int, block_q: int | None, block_k: int | None):
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


def _tile(x: torch.Tensor | None, b: tuple[int, int], i: tuple[int, int], j: tuple[int, int]):
    """The (batch b, query rows i, key rows j) tile of a (B|1, H|1, Tq|1, Tk) tensor; dims of 1 broadcast."""
    if x is None:
        return None
    return x[
        slice(*b) if x.shape[0] > 1 else slice(None), :, slice(*i) if x.shape[-2] > 1 else slice(None), slice(*j)
    ]


def _scores(q_i, k_j, bias_ij, acc_dtype) -> torch.Tensor:
    """One (bb, H, bq, bk) tile of the biased scores, in the accumulation dtype."""
    s = (q_i @ k_j.transpose(-2, -1)).to(acc_dtype)  # q is pre-scaled by 1 / sqrt(Dk)
    return s if bias_ij is None else s.add_(bias_ij)


def _new_seed() -> int:
    """A seed for one call's dropout, drawn from torch's global RNG (so torch.manual_seed rules)."""
    return int(torch.randint(0, 2**62, (1,)))


def _generator(device: torch.device, seed: int) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


class _ChunkedAttention(torch.autograd.Function):
    """Tiled attention with an online softmax over key blocks. Backward recomputes each score
    tile from Q, K and the saved row log-sum-exp instead of storing the weights, so memory
    stays linear in T in both directions (FlashAttention, Dao et al. 2022, on plain tensor ops).

    Every row of `bias` must have a key it may attend to (attend_bias opens dead rows).
    Dropout on the weights is drawn per tile from a generator seeded once per call; backward
    replays the seed in the same tile order, so it sees the same dropout masks.
    """

    @staticmethod
    def forward(ctx, q, k, v, bias, dropout_p: float, blocks: tuple[int, int, int]):
        B, H, Tq, Dk = q.shape
        acc_dtype = torch.promote_types(q.dtype, torch.float32)  # softmax statistics: fp32 or better
        q = (q * Dk**-0.5).contiguous()  # (B, H, Tq, Dk): scaled once; contiguous, so tiles fold into bmm
        k, v = k.contiguous(), v.contiguous()  # (B, H, Tk, Dk)
        # written in (B, Tq, H, Dk) layout: merging the heads afterwards is a free view
        out = q.new_empty(B, Tq, H, Dk).transpose(1, 2)  # (B, H, Tq, Dk)
        lse = q.new_empty(B, H, Tq, 1, dtype=acc_dtype)  # log-sum-exp of each row's scores
        seed = _new_seed() if dropout_p > 0 else 0
        gen = _generator(q.device, seed) if dropout_p > 0 else None
        threshold, keep_scale = dropout_threshold(dropout_p)
        bb, bq, bk = blocks
        for b in _spans(B, bb):
            for i in _spans(Tq, bq):
                q_i = q[slice(*b), :, slice(*i)]  # (bb, H, bq, Dk)
                row_max = row_sum = acc = None
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
                    if row_max is None:
                        row_sum, acc = p_sum, pv
                    else:
                        rescale = torch.exp(row_max - shift)  # what was summed under the old max
                        row_sum = row_sum * rescale + p_sum
                        acc = acc * rescale + pv
                    row_max = new_max
                out[slice(*b), :, slice(*i)] = acc / row_sum
                lse[slice(*b), :, slice(*i)] = row_max + row_sum.log()
        ctx.save_for_backward(q, k, v, out, lse, bias)
        ctx.dropout_p, ctx.seed, ctx.blocks = dropout_p, seed, blocks
        return out

    @staticmethod
    def backward(ctx, grad_out):
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


def chunked_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    block_q: int | None = None,
    block_k: int | None = None,
) -> torch.Tensor:
    """The same attention over (batch rows x query block x key block) tiles, online softmax.

    q (B, H, Tq, Dk), k and v (B, H, Tk, Dk) -> out (B, H, Tq, Dk). No Tq x Tk tensor exists in
    forward or backward: memory grows linearly with T. Rows with no key give zeros, like the
    math path. `dropout_p` drops attention weights (pass 0 outside training).
    """
    B, H, Tq, _ = q.shape
    Tk = k.shape[-2]
    mask4 = expand_mask(mask, B, Tq, Tk)
    bias, dead = attend_bias(mask4, torch.promote_types(q.dtype, torch.float32))
    blocks = _block_sizes(B, H, Tq, Tk, block_q, block_k)
    out = _ChunkedAttention.apply(q, k, v, bias, float(dropout_p), blocks)
    return out if dead is None else out.masked_fill(dead, 0.0)  # (B, H, Tq, Dk)


# ---- sdpa: torch's fused kernel, with our convention for rows with no key --------------------
def _sdpa_attention(q, k, v, mask4, dropout_p: float) -> torch.Tensor:
    if mask4 is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    # SDPA gives NaN or an average of V on a row with no visible key: open such rows for the
    # kernel, then zero their output (and so their gradients), as our convention says
    dead = ~mask4.any(dim=-1, keepdim=True)  # (B|1, H|1, Tq|1, 1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask4 | dead, dropout_p=dropout_p)
    return out.masked_fill(dead, 0.0)  # (B, H, Tq, Dk)


def _fused_linear(x: torch.Tensor, linears: tuple[nn.Linear, ...]) -> tuple[torch.Tensor, ...]:
    """Several projections of one input as a single GEMM over their stacked weights, split back.
    Stacking k D x D weights costs far less than the k - 1 extra passes over (B, T, D) it saves."""
    w = torch.cat([lin.weight for lin in linears])  # (k D, D)
    b = None if linears[0].bias is None else torch.cat([lin.bias for lin in linears])  # (k D,)
    return F.linear(x, w, b).chunk(len(linears), dim=-1)  # k x (B, T, D)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with projections `w_q`, `w_k`, `w_v`, `w_o` as in the tutorials.

    `attention_impl` picks how weights-free calls are computed: "math" (from scratch),
    "chunked" (from scratch, blockwise) or "sdpa" (torch's fused kernel). Calls that need the
    weights always take the math path, so the attention maps are the from-scratch computation.
    All three use the same parameters: a checkpoint trained with one runs with any other.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.1,
        bias: bool = True,
        attention_impl: str = "math",
    ) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}: "
                f"choose num_heads among the divisors of d_model"
            )
        if attention_impl not in ATTENTION_IMPLS:
            raise ValueError(f"attention_impl={attention_impl!r}: expected one of {ATTENTION_IMPLS}")
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.dropout_p = dropout
        self.attention_impl = attention_impl
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _project(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor):
        """Q, K, V projections, fused into one GEMM over the inputs they share."""
        if query is key and key is value:
            return _fused_linear(query, (self.w_q, self.w_k, self.w_v))  # self-attention: 3 x (B, T, D)
        if key is value:
            # cross-attention, or a layer computing only some query rows: K and V together
            return (self.w_q(query), *_fused_linear(key, (self.w_k, self.w_v)))  # (B, Tq, D), 2 x (B, Tk, D)
        return self.w_q(query), self.w_k(key), self.w_v(value)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T, Dk)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query (B, Tq, D), key/value (B, Tk, D), mask broadcastable to (B, H, Tq, Tk).

        Returns out (B, Tq, D) and weights (B, H, Tq, Tk) before dropout, or None.
        """
        B, Tq, _ = query.shape
        Tk = key.shape[1]
        q, k, v = (self._split_heads(t) for t in self._project(query, key, value))  # (B, H, T, Dk)
        mask4 = expand_mask(mask, B, Tq, Tk)  # (B|1, 1|H, Tq|1, Tk)
        p_drop = self.dropout_p if self.training else 0.0
        weights = None
        if need_weights or self.attention_impl == "math":
            out, weights = _math_attention(q, k, v, mask4, p_drop, zero_weights=need_weights)
        elif self.attention_impl == "chunked":
            out = chunked_attention(q, k, v, mask4, p_drop)
        else:
            out = _sdpa_attention(q, k, v, mask4, p_drop)
        out = out.transpose(1, 2).reshape(B, Tq, self.d_model)  # (B, Tq, D)
        return self.w_o(out), weights
