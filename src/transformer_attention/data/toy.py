"""The built-in toy review set, generated from word lists and templates (the same for a seed). The label depends on
word order: negation flips a sentiment word ("not good"), and after a contrast ("... but ...", "although ..., ...")
the second clause decides. So a bag of words cannot solve it, and attention has something to find."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from .rationales import rationales_by_text

if TYPE_CHECKING:
    from .datamodule import ReviewDataModule
    from .sources import Columns

POSITIVE = (
    "great wonderful fantastic brilliant excellent amazing superb delightful charming moving good beautiful funny "
    "clever gripping"
).split()
NEGATIVE = (
    "boring dull bad terrible awful poor weak dreadful bland tedious slow silly messy forgettable clumsy"
).split()
SUBJECTS = [
    "this movie", "the film", "the story", "the acting", "the plot", "the ending", "the soundtrack", "this show",
    "the cast", "the script", "the director", "the music", "the dialogue", "the performance", "the camera work",
]  # fmt: skip
INTENSIFIERS = ["very", "really", "truly", "so", "extremely", "quite", "incredibly"]
LOVE = ["love", "loved", "enjoyed", "liked", "adored"]
HATE = ["hate", "hated", "disliked", "loathed", "regretted"]
NEGATIONS = ["not", "never", "hardly", "not at all"]
LABEL_NAMES = ["negative", "positive"]

# the six sentences of the PyTorch tutorial, always in the training split
TUTORIAL = [
    ("this movie is great and wonderful", 1),
    ("i love this film very much", 1),
    ("what a fantastic performance", 1),
    ("the story is boring and dull", 0),
    ("i hate this movie", 0),
    ("this film is too bad to watch", 0),
]


def _adjective(rng: random.Random) -> tuple[str, int]:
    label = rng.randint(0, 1)
    return rng.choice(POSITIVE if label else NEGATIVE), label


def _maybe_intensify(rng: random.Random, adj: str) -> str:
    return f"{rng.choice(INTENSIFIERS)} {adj}" if rng.random() < 0.4 else adj


def _review(rng: random.Random) -> tuple[str, int]:
    """One review and its label (1 positive, 0 negative) from a randomly chosen template."""
    kind = rng.randrange(9)
    subj, subj2 = rng.choice(SUBJECTS), rng.choice(SUBJECTS)
    adj, label = _adjective(rng)
    if kind == 0:  # plain: "the plot is very clever"
        verb = rng.choice(["is", "was"])
        return f"{subj} {verb} {_maybe_intensify(rng, adj)}", label
    if kind == 1:  # negated: "the plot is not clever" flips the label
        verb = rng.choice(["is", "was"])
        neg = rng.choice(NEGATIONS)
        if neg == "not at all":
            return f"{subj} {verb} not {adj} at all", 1 - label
        return f"{subj} {verb} {neg} {adj}", 1 - label
    if kind == 2:  # contrast: the clause after "but" decides
        adj1, _ = _adjective(rng)
        return f"{subj} is {adj1} but {subj2} is {_maybe_intensify(rng, adj)}", label
    if kind == 3:  # concession: "although A is x , B is y": the main clause decides
        adj1, _ = _adjective(rng)
        return f"although {subj} is {adj1} , {subj2} is {adj}", label
    if kind == 4:  # agreement: "the cast is funny and clever"
        adj2 = rng.choice(POSITIVE if label else NEGATIVE)
        return f"{subj} is {adj} and {adj2}", label
    if kind == 5:  # verbs of feeling: "i loved this movie"
        verb = rng.choice(LOVE if label else HATE)
        return f"i {verb} {subj}", label
    if kind == 6:  # negated verbs: "i did not enjoy the script" (and "i did not hate ...")
        verb = rng.choice(["love", "enjoy", "like"] if label else ["hate", "dislike", "regret"])
        return f"i did not {verb} {subj}", 1 - label
    if kind == 7:  # exclamation: "what a brilliant performance"
        noun = rng.choice(["performance", "film", "movie", "story", "ending", "show"])
        return f"what a {_maybe_intensify(rng, adj)} {noun}", label
    # negated contrast: "the plot is not bad but the ending is dull"
    adj1, _ = _adjective(rng)
    return f"{subj} is not {adj1} but {subj2} is {adj}", label


def make_toy_splits(
    num_examples: int = 4000, seed: int = 0, val_fraction: float = 0.1, test_fraction: float = 0.1
) -> dict[str, Columns]:
    """Unique generated reviews split into train / validation / test, no text in two splits."""
    rng = random.Random(seed)
    tutorial = dict(TUTORIAL)
    seen: dict[str, int] = {}
    attempts = 0
    while len(seen) < num_examples and attempts < 50 * num_examples:
        text, label = _review(rng)
        attempts += 1
        if text not in seen and text not in tutorial:
            seen[text] = label
    items = sorted(seen.items())
    rng.shuffle(items)
    n_val, n_test = int(len(items) * val_fraction), int(len(items) * test_fraction)
    splits = {
        "validation": items[:n_val],
        "test": items[n_val : n_val + n_test],
        "train": TUTORIAL + items[n_val + n_test :],
    }
    return {name: {"text": [t for t, _ in rows], "label": [y for _, y in rows]} for name, rows in splits.items()}


# the words that carry a toy review's label: sentiment words and verbs, and the negations that flip them
CUES = {*POSITIVE, *NEGATIVE, *LOVE, *HATE, *"love enjoy like hate dislike regret not never hardly".split()}


def deciding_words(text: str) -> list[bool]:
    """Which of a toy review's words decide its label: the sentiment words and negations of the deciding clause
    (after "but"; after the comma of "although ..., ..."; else the whole review)."""
    words = text.split()
    start = 0
    if "but" in words:
        start = words.index("but") + 1
    elif words[:1] == ["although"] and "," in words:
        start = words.index(",") + 1
    return [i >= start and w in CUES for i, w in enumerate(words)]


def deciding_words_for(data: object) -> Callable[[str], list[bool] | None] | None:
    """The data's own rationales when it has a rationale column; `deciding_words` for the toy set; else None."""
    if getattr(data, "rationale_column", None):  # only a ReviewDataModule has rationales
        return rationales_by_text(cast("ReviewDataModule", data).load())
    files = getattr(data, "path", None) or getattr(data, "data_files", None)
    return deciding_words if getattr(data, "name", None) == "toy" and not files else None
