"""The guide's picture of TensorBoard's text view (docs/analysis.md): of a checkpoint's validation reviews of 14 to 24
tokens (the first 300), the one where DecompX's contributions and attention's pooled row disagree most (Kendall tau),
rendered as the callback renders it, and each token's two numbers printed.

    python benchmarks/text_view.py <checkpoint> docs/text_view_decompx.png [data folder, ../shared/data/rotten_tomatoes]
"""

import glob
import sys

import pyarrow.parquet as pq
import torch
from PIL import Image
from scipy.stats import kendalltau

from transformer_attention.analysis import decompx
from transformer_attention.callbacks.text_view import text_rows
from transformer_attention.data.tokenizer import encode, load_tokenizer
from transformer_attention.inference import infer
from transformer_attention.plotting import attention_rollout, pooled_rollout
from transformer_attention.plotting.text import ReviewText
from transformer_attention.plotting.words import pooled_row
from transformer_attention.training.checkpoint import load_module

module = load_module(sys.argv[1])
tok = load_tokenizer(module.tokenizer_json)
folder = sys.argv[3] if len(sys.argv) > 3 else "../shared/data/rotten_tomatoes"
f = sorted(glob.glob(f"{folder}/*valid*"))[0]
t = pq.read_table(f).to_pydict()
texts = t["text"][:300]
rows = encode(tok, texts, 64)
names = module.hparams["label_names"]
best = None
for i, row in enumerate(rows):
    if not 14 <= len(row) <= 24:
        continue
    ids = torch.tensor([list(row)])
    mask = torch.ones_like(ids, dtype=torch.bool)
    d = decompx(module.net, ids, mask)
    pred = int(d.logits.argmax())
    (r,) = infer(module, [row], need_weights=True)
    att = pooled_row(r.attentions[0].numpy(), "mean")
    tau = kendalltau(att[1:], d.tokens[0, 1:, pred].numpy()).statistic
    if best is None or tau < best[0]:
        best = (tau, i, pred, [a.numpy() for a in r.attentions])
tau, i, pred, layers = best
row = list(rows[i])
tokens = [tok.id_to_token(int(x)) for x in row]
shares = pooled_rollout(attention_rollout(layers), "mean")
pooled, labels, scored = text_rows(
    module,
    row,
    layers,
    pooling="mean",
    heads=0,
    shares=shares,
    method="decompx",
    predicted=pred,
    class_name=names[pred],
)
title = f"validation review {i} \u00b7 predicted {names[pred]}"
view = ReviewText(tokens, len(pooled), title, pooling="mean", signed=scored)
Image.fromarray(view.render(pooled, labels)).save(sys.argv[2])
d = decompx(module.net, torch.tensor([row]), torch.ones(1, len(row), dtype=torch.bool))
print("tau", tau, "text", texts[i], "pred", names[pred])
for t, a, c in zip(tokens, pooled[1], d.tokens[0, :, pred].numpy(), strict=True):
    print(f"{t:>14} att {a:.3f} decompx {c:+.3f}")
print("rest", d.rest[0].numpy(), "logits", d.logits[0].numpy())
