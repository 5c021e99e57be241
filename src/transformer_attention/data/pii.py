"""PII scrubbing: e-mail addresses, URLs, phone numbers and long digit runs become placeholder tokens. The patterns
run here, before tokenization (every replacement counted), and in the tokenizer's normalizer (a saved tokenizer
scrubs texts at predict time too), so each is in the regex subset that `re` and Oniguruma read alike."""

from __future__ import annotations

import re
from collections import Counter

# kind -> (placeholder token, pattern); applied in this order (URLs first: they may contain an "@")
PII_PATTERNS: dict[str, tuple[str, str]] = {
    "url": ("[URL]", r"(?:https?://|www\.)[^\s<>\"']*[^\s<>\"'.,;:!?)\]]"),
    "email": ("[EMAIL]", r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
    "phone": (
        "[PHONE]",
        r"(?<![\w+])(?:\+[0-9]{1,3}(?:[\s.-]?[0-9]{2,4}){2,4}"  # +44 20 7946 0958
        r"|(?:\([0-9]{3}\)\s?|[0-9]{3}[\s.-])[0-9]{3}[\s.-][0-9]{4})(?!\w)",  # (555) 123-4567, 555.123.4567
    ),
    "number": ("[NUM]", r"[0-9]{6,}"),  # ID, account and card numbers; years (4 digits) stay
}
PII_TOKENS = [token for token, _ in PII_PATTERNS.values()]
_COMPILED = [(kind, token, re.compile(pattern)) for kind, (token, pattern) in PII_PATTERNS.items()]


def scrub_pii(texts: list[str]) -> tuple[list[str], Counter[str]]:
    """Replace PII in every text by its placeholder; returns the new texts and a count per kind."""
    counts: Counter[str] = Counter({kind: 0 for kind in PII_PATTERNS})
    out = []
    for text in texts:
        for kind, token, regex in _COMPILED:
            text, n = regex.subn(token, text)
            counts[kind] += n
        out.append(text)
    return out, counts
