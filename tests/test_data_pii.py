"""PII scrubbing: what is replaced, what stays, counts, and the tokenizer keeping placeholders whole."""

from __future__ import annotations

import ast
import logging
import re
from collections import Counter

import pandas as pd
import pytest

from transformer_attention.data import PII_TOKENS, ReviewDataModule, load_tokenizer, scrub_pii, train_tokenizer
from transformer_attention.data.tokenizer import encode

CASES = [
    ("mail me at Jane.Doe+films@example.co.uk today", "mail me at [EMAIL] today", "email"),
    ("see https://www.example.com/review?id=3. great", "see [URL]. great", "url"),
    ("or www.imdb.com/title/tt01 for more", "or [URL] for more", "url"),
    ("call (555) 123-4567 now", "call [PHONE] now", "phone"),
    ("call 555.123.4567 or +44 20 7946 0958", "call [PHONE] or [PHONE]", "phone"),
    ("my card 4111111111111111 was charged", "my card [NUM] was charged", "number"),
    ("ticket #00012345!", "ticket #[NUM]!", "number"),
]
KEPT = [
    "released in 1999, it runs 120 minutes and cost $30,000",
    "rated 10/10, seen 3 times in 2004 2005 2006",
    "the @ sign and a dot. com are not an address",
]


@pytest.mark.parametrize("text, scrubbed, kind", CASES)
def test_pii_replaced_and_counted(text, scrubbed, kind):
    out, counts = scrub_pii([text])
    assert out == [scrubbed]
    assert counts[kind] == sum(scrubbed.count(t) for t in PII_TOKENS) == sum(counts.values())


def test_ordinary_numbers_and_symbols_stay():
    out, counts = scrub_pii(KEPT)
    assert out == KEPT and sum(counts.values()) == 0


def test_tokenizer_keeps_placeholders_whole_and_scrubs_raw_text_itself(tmp_path):
    raw = [text for text, _, _ in CASES]
    scrubbed, _ = scrub_pii(raw)
    tok = train_tokenizer(scrubbed + KEPT, vocab_size=300, min_frequency=1, scrub_pii=True)
    pii_ids = {tok.token_to_id(t) for t in PII_TOKENS}
    assert None not in pii_ids
    for text in scrubbed:
        ids = tok.encode(text).ids
        assert sum(i in pii_ids for i in ids) == sum(text.count(t) for t in PII_TOKENS)
    # a saved tokenizer scrubs unseen raw text the same way (predict time needs no extra step)
    reloaded = load_tokenizer(tok.to_str())
    assert [r.tolist() for r in encode(reloaded, raw, 64)] == [r.tolist() for r in encode(tok, scrubbed, 64)]


def test_datamodule_scrubs_and_logs_counts(tmp_path, caplog):
    texts = [text for text, _, _ in CASES] + KEPT
    pd.DataFrame({"text": texts, "label": [i % 2 for i in range(len(texts))]}).to_csv(tmp_path / "train.csv")
    with caplog.at_level(logging.INFO):
        dm = ReviewDataModule(name="local", path=str(tmp_path), val_fraction=0.3, scrub_pii=True, min_frequency=1)
        dm.setup("fit")
    stored = dm.splits["train"].texts + dm.splits["validation"].texts + dm.splits["test"].texts
    assert sorted(stored) == sorted(scrub_pii(texts)[0])
    logged = [ast.literal_eval(d) for d in re.findall(r"scrub_pii \w+: replaced (\{.*\})", caplog.text)]
    assert len(logged) == 3  # one line per split: train and the carved validation and test
    expected = scrub_pii(texts)[1]
    assert expected == Counter(email=1, url=2, phone=3, number=2)
    assert sum((Counter(d) for d in logged), Counter()) == +expected
    assert dm.tokenizer.encode("write to a@b.com").ids[-1] == dm.tokenizer.token_to_id("[EMAIL]")
