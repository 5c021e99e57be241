"""`data.rationale_column`: a dataset's own deciding words, read from a file, carried through the data module
and scored by the faithfulness analysis as the toy set's are."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_entry
from test_checkpoint import save_like_lightning, tiny_module
from test_data import hf_cache, module, reviews, write  # noqa: F401 - hf_cache: the fixture
from test_refusals import refused

from transformer_attention.analysis.plan import plan
from transformer_attention.analysis.plausibility import word_rationale
from transformer_attention.analysis.run import run_analyses
from transformer_attention.data.rationales import rationale_flags
from transformer_attention.data.tokenizer import train_tokenizer
from transformer_attention.data.toy import deciding_words, deciding_words_for
from transformer_attention.errors import DataError


def test_a_rationale_is_a_list_of_words_or_one_flag_per_whitespace_word():
    text = "Not good!, at all"
    assert rationale_flags(["good", "NOT"], text, "f") == [True, True, False, False]  # punctuation, case ignored
    assert rationale_flags('["good"]', text, "f") == [False, True, False, False]  # a CSV cell: JSON
    assert rationale_flags("at all", text, "f") == [False, False, True, True]  # a plain string: its words
    assert rationale_flags(["good at"], "good, good at all", "f") == [False, True, True, False]  # a phrase: its run
    assert rationale_flags(["good"], "good, good at all", "f") == [True, True, False, False]  # a word: every one
    assert rationale_flags([0, 1, 0, 1], text, "f") == [False, True, False, True]
    assert rationale_flags(np.array([1, 0, 0, 0]), text, "f") == [True, False, False, False]  # parquet's lists
    assert rationale_flags([0.0, 1.0, 0.0, 1.0], text, "f") == [False, True, False, True]  # parquet's float lists
    assert rationale_flags([], text, "f") == [False] * 4  # nothing marked: left out of the scores, not refused
    for bad, says in [
        ([0, 1], "has 2 flags for 4 whitespace words"),
        ([0, 2, 1, 0], "rationale flag 2 at word 1 is not 0 or 1"),
        (np.array([0.0, 0.5, 1.0, 0.0]), "rationale flag 0.5 at word 1 is not 0 or 1"),
        ([0, None, 1, 0], "rationale has no value at position 1 of 4"),
        ([0, float("nan"), 1, 0], "rationale has no value at position 1 of 4"),
        (["great"], "rationale words ['great'] are not words of the text"),
        ([1, "x"], "mixes words and other values"),
        ([1, "x", *[0] * 800], "rationale [1, 'x', 0, 0, 0, 0, 0, 0, ...] mixes words"),  # a long list, cut
        (3, "rationale 3 is not a list"),
    ]:
        with pytest.raises(DataError, match="give a list of the deciding words") as e:
            rationale_flags(bad, text, "file a.csv row 2")
        assert str(e.value).startswith("file a.csv row 2: ") and says in str(e.value) and "\n" not in str(e.value)


def test_tokens_belong_to_the_whitespace_word_they_start_in():
    text = "not good!, at all"
    tok = train_tokenizer([text], vocab_size=200, min_frequency=1)
    n = len(tok.encode(text).ids)  # [CLS] not good ! , at all
    found = word_rationale(text, [0, 1, 0, 0], tok, n)
    assert found.flags.tolist() == [False, True, False, False]  # one flag per whitespace word, as given
    assert [w.tokens for w in found.words] == [[0], [1], [2, 3, 4], [5], [6]]  # "good!," is three tokens
    assert word_rationale(text, [0, 1], tok, n) is None  # flags for other words than the text's
    assert word_rationale(text, None, tok, n) is None  # no rationale for this text


def with_rationales(frames: dict, as_words: bool) -> dict:
    """`frames` with a rationale column: the toy generator's deciding words, as words or as 0/1 JSON lists."""
    for df in frames.values():
        flags = [deciding_words(t) for t in df["text"]]
        words = [[w for w, d in zip(t.split(), f, strict=True) if d] for t, f in zip(df["text"], flags, strict=True)]
        df["rationale"] = (
            [json.dumps(w) for w in words] if as_words else [json.dumps([int(d) for d in f]) for f in flags]
        )
    return frames


@pytest.mark.parametrize(("fmt", "as_words"), [("csv", True), ("csv", False), ("jsonl", True), ("parquet", False)])
def test_the_rationale_column_reaches_the_analysis_through_carved_splits(tmp_path: Path, fmt: str, as_words: bool):
    frames = with_rationales(reviews(), as_words)
    if fmt != "csv":  # real lists in JSON lines and parquet
        for df in frames.values():
            df["rationale"] = [json.loads(v) for v in df["rationale"]]
    dm = module(write(tmp_path / "data", frames, fmt), rationale_column="rationale", cache_dir=str(tmp_path / "c"))
    dm.setup("fit")
    assert set(dm.raw) == {"train", "validation", "test"}  # validation carved from train, rationales with it
    words = deciding_words_for(dm)
    for cols in dm.raw.values():
        assert len(cols["rationale"]) == len(cols["text"])
        for text in cols["text"]:
            # "," is a word of the toy generator and never deciding; words match without punctuation
            assert words(text) == deciding_words(text), text
    assert words("a text that is not in the data") is None
    assert deciding_words_for(module(tmp_path / "data")) is None  # no column: no plausibility


def test_the_rationale_column_leaves_the_tokenized_splits_as_they_are(tmp_path: Path):
    data = write(tmp_path / "data", with_rationales(reviews(), as_words=True), "csv")
    cache = tmp_path / "cache"
    runs = [module(data, rationale_column=column, cache_dir=str(cache)) for column in (None, "rationale")]
    for dm in runs:
        dm.setup("fit")
    without, with_column = ({s: [r.tolist() for r in d.ids] for s, d in dm.splits.items()} for dm in runs)
    assert with_column == without
    assert len(list(cache.rglob("ids-*.npz"))) == 3  # train, validation, test: the second run read the first's


def test_a_bad_rationale_is_one_data_error_naming_the_file_split_and_row(tmp_path: Path):
    frames = with_rationales(reviews(), as_words=True)
    frames["test"].loc[3, "rationale"] = '["splendid"]'
    data = write(tmp_path / "data", frames, "csv")
    with pytest.raises(DataError) as e:
        module(data, rationale_column="rationale").setup("fit")
    line = str(e.value)
    assert "test.csv" in line and "split 'test'" in line and "row 3" in line and "['splendid']" in line
    assert "data.rationale_column=null" in line
    with pytest.raises(DataError, match="data.rationale_column='why' is not a column"):
        module(data, rationale_column="why").setup("fit")
    with pytest.raises(DataError, match="data.scrub_pii=false or data.rationale_column=null"):
        module(data, rationale_column="rationale", scrub_pii=True)


BAD_FLAGS = {  # a row of n words: its flags, and what the refusal says
    "a 2": (lambda n: [0, 2] + [0] * (n - 2), "rationale flag 2 at word 1 is not 0 or 1"),
    "one too many": (lambda n: [0] * (n + 1), "flags for"),
    "a gap": (lambda n: [0.0, None] + [1.0] * (n - 2), "no value at position 1"),
}


@pytest.mark.parametrize("bad", BAD_FLAGS)
def test_a_bad_row_of_parquet_flags_is_one_line_naming_the_file_split_and_row(tmp_path: Path, bad: str):
    flags, says = BAD_FLAGS[bad]
    frames = with_rationales(reviews(), as_words=False)
    for df in frames.values():
        df["rationale"] = [json.loads(v) for v in df["rationale"]]
    frames["train"].at[5, "rationale"] = flags(len(frames["train"].loc[5, "text"].split()))
    data = write(tmp_path / "data", frames, "parquet")
    with pytest.raises(DataError) as e:
        module(data, rationale_column="rationale").setup("fit")
    line = str(e.value)
    assert "train.parquet" in line and "split 'train' column 'rationale' row 5: " in line and says in line, line
    assert "\n" not in line and len(line) < 600  # one line, however long the list


def test_the_files_rationales_score_exactly_as_the_toy_sets_deciding_words(tmp_path: Path):
    net = tiny_module()
    data = write(tmp_path / "data", with_rationales(reviews(n_test=30), as_words=False), "jsonl")
    dm = module(data, rationale_column="rationale", tokenizer=net.tokenizer_json)
    dm.setup("test")
    chosen = plan(["faithfulness"], {"samples": 30, "normalized": False}, {"test": 30}, split="test")
    found = {
        source: run_analyses(net.net, chosen, splits=dm.splits, tokenizer=dm.tokenizer, deciding_words=words)
        for source, words in (("file", deciding_words_for(dm)), ("toy", deciding_words))
    }
    file, toy = found["file"].faithfulness, found["toy"].faithfulness
    assert file.plausible == toy.plausible > 20  # texts with some deciding words and some not
    for method, scores in toy.scores.items():
        measures = ("auprc", "average_precision", "token_f1")
        assert {m: file.scores[method][m] for m in measures} == {m: scores[m] for m in measures}, method


def test_evaluate_scores_plausibility_against_the_files_rationales(tmp_path: Path):
    ckpt = save_like_lightning(tiny_module(), tmp_path / "model.ckpt")  # a hand-built net: no training
    data = write(tmp_path / "data", with_rationales(reviews(n_test=30), as_words=True), "csv")
    args = [f"ckpt_path={ckpt}", "data=local", f"data.path={data}", "analyses=[faithfulness]", "analysis.samples=30"]
    proc = run_entry("evaluate.py", *args, "data.rationale_column=rationale", f"paths.log_dir={tmp_path / 'out'}")
    assert "AUPRC" in proc.stdout and "tok F1" in proc.stdout, proc.stdout
    (run,) = (tmp_path / "out" / "evaluate" / "runs").iterdir()
    saved = json.loads((run / "analysis" / "faithfulness.json").read_text())
    assert saved["plausibility_texts"] > 20
    assert all(0 <= s["auprc"] <= 1 and 0 <= s["token_f1"] <= 1 for s in saved["scores"].values())
    frames = with_rationales(reviews(), as_words=True)
    frames["test"].loc[0, "rationale"] = "[0, 1]"
    bad = write(tmp_path / "bad", frames, "csv")
    overrides = [f"data.path={bad}", "data.rationale_column=rationale", f"paths.log_dir={tmp_path / 'bad_out'}"]
    line = refused("evaluate.py", *args[:2], *overrides, kind="data error")
    assert "test.csv" in line and "split 'test' column 'rationale' row 0: rationale has 2 flags for" in line
