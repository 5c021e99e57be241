"""DecompX (Modarressi et al., ACL 2023, "DecompX: Explaining Transformers Decisions by Propagating Token
Decomposition"): what each word of a text adds to each class's logit, signed, through every part of the
encoder.

DecompX carries each input token's share of every representation as its own vector: through attention with the
weights as they were, the residual, each LayerNorm with its scale frozen at the actual input (a linear map), the
feed-forward block with its activation linearised at the actual pre-activation, the pooling and the head. Bias
terms and positions stay apart (decompx_paper.py shares them out as the paper does). Held that way the network is
an affine map of its input x0 (_forward.py's rules `freeze_attention`, `freeze_norms`, `secant`), so the vector
DecompX carries for a token, read by the head, is that map's Jacobian times the token's input vector: here computed
as one forward pass of its own and one backward pass per class, the same numbers as propagating T vectors per token
at the cost of a gradient.

The parts: `tokens` (B, T, C), each word vector's contribution; `ngrams` (B, T, C), the n-gram vectors that
end at each position; `positions` (B, C) and `bias` (B, C), the rest: `tokens.sum(1) + rest == logits`, to
float64 rounding. The activation is linearised by its secant act(u) / u through zero, so the sum is exact for
ReLU and GELU alike (both have act(0) = 0). As a ranking of words (`explain`), an n-gram's contribution is
shared equally by the words it is made of (the first word's stand-in before [CLS] takes no share).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from ...model.classifier import TransformerClassifier
from ...module import evaluating
from ..passes import Passes
from . import Explanation, Method, Options, register
from ._forward import Rules, run
from ._inputs import checked

DECOMPX = Rules(freeze_attention=True, freeze_norms=True, secant=True)


@dataclass
class Decomposition:
    """The logits (B, C) taken apart: `tokens` (B, T, C) by word, `ngrams` (B, T, C) by the position whose n-gram
    vectors they are, `positions` (B, C), `bias` (B, C), the naive-Bayes term `evidence_by_n[n - 1]` (B, T, C)
    by the position whose n-gram it is (model/evidence.py: it adds to the logits directly, so it is its own
    decomposition); `rest` = positions + bias + the n-grams and the evidence summed."""

    logits: torch.Tensor
    tokens: torch.Tensor
    positions: torch.Tensor
    bias: torch.Tensor
    ngrams_by_n: list[torch.Tensor] = field(default_factory=list, repr=False)  # n = 2, 3, ...: (B, T, C) each
    evidence_by_n: list[torch.Tensor] = field(default_factory=list, repr=False)  # n = 1, 2, ...: (B, T, C) each

    @property
    def evidence(self) -> torch.Tensor:
        """(B, T, C): the naive-Bayes evidence of the n-grams ending at each position (zero without that term)."""
        return sum(self.evidence_by_n, torch.zeros_like(self.tokens))

    @property
    def ngrams(self) -> torch.Tensor:
        """(B, T, C): the n-gram vectors ending at each position, all n together (zero without an n-gram table)."""
        return sum(self.ngrams_by_n, torch.zeros_like(self.tokens))

    @property
    def rest(self) -> torch.Tensor:
        """(B, C): what is not a word's own: the positions, the biases, the n-gram vectors and evidence."""
        return self.positions + self.bias + (self.ngrams + self.evidence).sum(dim=1)


def decompx(
    net: TransformerClassifier, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> Decomposition:
    """`net` (a TransformerClassifier) on input_ids (B, T), attention_mask (B, T) bool (None: from its pad id),
    decomposed by DecompX in float64, dropout off (eval mode for the pass, each submodule's mode restored). A row
    that sees no key is the model's too: its attention is zero, its parts still sum to its logits."""
    mask = checked(net, input_ids, attention_mask)
    with evaluating(net), torch.enable_grad():
        trace = run(net, input_ids, mask, DECOMPX)
        per_class = []
        for c in range(trace.logits.shape[1]):
            (grad,) = torch.autograd.grad(trace.logits[:, c].sum(), trace.x0, retain_graph=True)
            per_class.append(grad)  # (B, T, D): d logit_c / d x0
    g = torch.stack(per_class, dim=-1)  # (B, T, D, C)

    def read(part: torch.Tensor) -> torch.Tensor:
        return torch.einsum("btd,btdc->btc", part, g)  # (B, T, C): the head's reading of each position's part

    logits = trace.logits.detach()
    tokens = read(trace.words)
    by_n = [read(n) for n in trace.ngrams]
    positions = read(trace.positions).sum(dim=1)
    grams = sum((n.sum(dim=1) for n in by_n), torch.zeros_like(logits))  # (B, C)
    evidence = sum((n.sum(dim=1) for n in trace.evidence), torch.zeros_like(logits))  # (B, C)
    bias = logits - tokens.sum(dim=1) - grams - positions - evidence
    return Decomposition(logits, tokens, positions, bias, ngrams_by_n=by_n, evidence_by_n=trace.evidence)


def word_shares(found: Decomposition) -> torch.Tensor:
    """(B, T, C): each word's own contribution plus an equal share of every n-gram it is part of (the n-gram
    ending at t is made of the words at t - n + 1 .. t, those before position 0 being stand-ins), n-gram vectors
    and naive-Bayes evidence alike, whatever T."""
    parts = [*enumerate(found.ngrams_by_n, start=2), *enumerate(found.evidence_by_n, start=1)]
    return shared_by_words(found.tokens.clone(), parts)


def ngram_shares(part: torch.Tensor, n: int) -> tuple[torch.Tensor, range]:
    """`part` (B, T, ...), what the n-gram ending at each position holds, as each of its real words' equal share
    (B, T, ...) (the n-gram ending at t is the words t - n + 1 .. t; those before position 0 are stand-ins and take
    none), and the offsets `back` of its words: the word at t - back takes share[:, t]."""
    T = part.shape[1]
    count = torch.clamp(torch.arange(T, device=part.device) + 1, max=n).to(part.dtype)  # (T,) real words in each
    return part / count.view(1, T, *[1] * (part.dim() - 2)), range(min(n, T))


def shared_by_words(out: torch.Tensor, parts: list[tuple[int, torch.Tensor]]) -> torch.Tensor:
    """`out` (B, T, C) plus, for each (n, part) of `parts`, `part` (B, T, C), the n-grams ending at each position,
    shared equally by the words of each n-gram (in place; returns `out`)."""
    T = out.shape[1]
    for n, part in parts:
        share, backs = ngram_shares(part, n)
        for back in backs:  # the word `back` places before the n-gram's end
            out[:, : T - back] += share[:, back:]
    return out


def evidence_shares(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor) -> Tensor:
    """(B, T) float64: each word's share of the explained class's naive-Bayes term (model/evidence.py), each
    n-gram's evidence shared equally by its words; zero without that term. The term is linear in the n-grams'
    presence, so this is its exact share for every method that explains the logits by word."""
    if net.evidence is None:
        return torch.zeros(ids.shape, dtype=torch.float64, device=ids.device)
    with torch.no_grad():
        parts = [part.double() for part in net.evidence.by_n(ids, mask)]
    shares = shared_by_words(torch.zeros_like(parts[0]), list(enumerate(parts, start=1)))  # (B, T, C)
    return shares.gather(2, target.view(-1, 1, 1).expand(-1, ids.shape[1], 1)).squeeze(2)


def explain(net: TransformerClassifier, ids: Tensor, mask: Tensor, target: Tensor, options: Options) -> Explanation:
    """The predicted (or asked) class's row of the decomposition, per word, n-grams shared."""
    found = decompx(net, ids, mask)
    per_word = word_shares(found)  # (B, T, C)
    return Explanation(per_word.gather(2, target.view(-1, 1, 1).expand(-1, ids.shape[1], 1)).squeeze(2))


def passes(length: int, classes: int, options: Options) -> Passes:
    return Passes(forward=1, backward=classes)


register(Method("decompx", "DecompX", signed=True, explain=explain, passes=passes))
