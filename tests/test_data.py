"""ReviewDataModule on local files written here: every format through `datasets`, labels, splits, cache, errors."""

from __future__ import annotations

import logging
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
import torch

from transformer_attention.data import DataError, ReviewDataModule, load_tokenizer, make_toy_splits
from transformer_attention.data import cache as cache_module
from transformer_attention.data.labels import labels_to_ids
from transformer_attention.data.tokenizer import encode, train_tokenizer
from transformer_attention.data.toy import TUTORIAL


@pytest.fixture(autouse=True)
def hf_cache(tmp_path_factory, monkeypatch):
    """Keep the Arrow files `datasets` makes from test data out of the user's cache."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path_factory.getbasetemp() / "hf_datasets"))


def reviews(n_train: int = 60, n_test: int = 20, seed: int = 0) -> dict[str, pd.DataFrame]:
    """Unique generated reviews, int labels: `n_train` rows of train, `n_test` of test."""
    rows = pd.DataFrame(make_toy_splits(n_train + n_test, seed=seed, val_fraction=0.0, test_fraction=0.0)["train"])
    rows = rows.iloc[len(TUTORIAL) :].reset_index(drop=True)
    return {"train": rows.iloc[:n_train].reset_index(drop=True), "test": rows.iloc[n_train:].reset_index(drop=True)}


def write(folder: Path, frames: dict[str, pd.DataFrame], fmt: str) -> Path:
    """Write one file per split, named by split, as `fmt` (parquet, csv, tsv, jsonl, json, disk)."""
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "disk":
        dd = datasets.DatasetDict({k: datasets.Dataset.from_pandas(v, preserve_index=False) for k, v in frames.items()})
        dd.save_to_disk(str(folder))
        return folder
    for split, df in frames.items():
        path = folder / f"{split}.{fmt}"
        if fmt == "parquet":
            df.to_parquet(path)
        elif fmt in ("csv", "tsv"):
            df.to_csv(path, index=False, sep="\t" if fmt == "tsv" else ",")
        elif fmt == "jsonl":
            df.to_json(path, orient="records", lines=True)
        else:
            df.to_json(path, orient="records")
    return folder


def module(path: Path | None = None, **kw) -> ReviewDataModule:
    kw.setdefault("vocab_size", 200)
    kw.setdefault("min_frequency", 1)
    kw.setdefault("batch_size", 8)
    return ReviewDataModule(name="local", path=str(path) if path else None, **kw)


# ---- loading through the real `datasets` code path ------------------------------------------
@pytest.mark.parametrize("fmt", ["parquet", "csv", "tsv", "jsonl", "json", "disk"])
def test_loads_every_local_format(tmp_path, fmt):
    frames = reviews()
    dm = module(write(tmp_path / fmt, frames, fmt))
    dm.setup("fit")
    assert set(dm.splits) == {"train", "validation", "test"}
    train_texts = set(dm.splits["train"].texts) | set(dm.splits["validation"].texts)
    assert train_texts == set(frames["train"]["text"])
    assert dm.splits["test"].texts == list(frames["test"]["text"])
    assert dm.splits["test"].labels == list(frames["test"]["label"])
    assert dm.label_names == ["0", "1"] and dm.num_classes == 2


def test_data_files_by_split_relative_to_path(tmp_path):
    frames = reviews()
    frames["train"].to_csv(tmp_path / "mine.csv", index=False)
    frames["test"].to_csv(tmp_path / "held_out.csv", index=False)
    frames["test"].iloc[:5].to_csv(tmp_path / "dev.csv", index=False)
    dm = module(tmp_path, data_files={"train": "mine.csv", "validation": "dev.csv", "test": "held_out.csv"})
    dm.setup("fit")
    assert [len(dm.splits[s]) for s in ("train", "validation", "test")] == [60, 5, 20]


def test_sharded_files_and_split_aliases(tmp_path):
    frames = reviews()
    half = len(frames["train"]) // 2
    frames["train"].iloc[:half].to_parquet(tmp_path / "train-00000-of-00002.parquet")
    frames["train"].iloc[half:].to_parquet(tmp_path / "train-00001-of-00002.parquet")
    frames["test"].iloc[:8].to_parquet(tmp_path / "dev.parquet")
    frames["test"].iloc[8:].to_parquet(tmp_path / "test.parquet")
    dm = module(tmp_path)
    dm.setup("fit")
    assert [len(dm.splits[s]) for s in ("train", "validation", "test")] == [60, 8, 12]


def test_split_names_map_their_splits_to_ours(tmp_path):
    frames = reviews()
    frames["unlabelled"] = frames["test"].assign(label=-1)
    write(tmp_path, frames, "parquet")
    dm = module(tmp_path, split_names={"train": "train", "validation": None, "test": "test"})
    dm.setup("fit")
    assert len(dm.splits["train"]) + len(dm.splits["validation"]) == 60
    with pytest.raises(DataError, match=r"split_names.test='nope'.*splits \["):
        module(tmp_path, split_names={"train": "train", "test": "nope"}).setup("fit")


# ---- labels ------------------------------------------------------------------------------------
def test_string_labels_multiclass_mapped_and_recorded(tmp_path):
    words = ["neg", "pos", "neutral"]
    frames = {
        "train": pd.DataFrame(
            {
                "text": [f"review number {i} is {words[i % 3]}" for i in range(30)],
                "label": [words[i % 3] for i in range(30)],
            }
        ),
        "test": pd.DataFrame({"text": ["it is pos", "it is neg"], "label": ["pos", "neg"]}),
    }
    out = tmp_path / "run"
    dm = module(write(tmp_path / "d", frames, "csv"), output_dir=str(out))
    dm.setup("fit")
    assert dm.label_names == ["neg", "neutral", "pos"] and dm.num_classes == 3
    assert dm.splits["test"].labels == [2, 0]
    ds = dm.splits["train"]
    assert all(dm.label_names[y] in text for y, text in zip(ds.labels, ds.texts, strict=True))
    assert (out / "label_names.json").read_text().strip() == '["neg", "neutral", "pos"]'
    # names given (e.g. from a checkpoint) fix the ids
    dm2 = module(tmp_path / "d", label_names=["pos", "neg", "neutral"])
    dm2.setup("test")
    assert dm2.splits["test"].labels == [0, 1]


def test_class_label_feature_names_are_used(tmp_path):
    feats = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["bad", "good"])})
    toy = make_toy_splits(40, seed=1)
    dd = datasets.DatasetDict({s: datasets.Dataset.from_dict(toy[s], features=feats) for s in toy})
    dd.save_to_disk(str(tmp_path))
    dm = module(tmp_path)
    dm.setup("fit")
    assert dm.label_names == ["bad", "good"]


def test_num_classes_from_data_unless_set(tmp_path):
    frames = reviews()
    frames["train"]["label"] = np.arange(60) % 4
    write(tmp_path, frames, "parquet")
    dm = module(tmp_path)
    dm.setup("fit")
    assert dm.num_classes == 4 and dm.label_names == ["0", "1", "2", "3"]
    dm = module(tmp_path, num_classes=5)
    dm.setup("fit")
    assert dm.num_classes == 5


def test_label_errors_name_the_value():
    with pytest.raises(DataError, match=r"labels mix types: int 1 \(split 'train', row 0\) and str 'pos'"):
        labels_to_ids({"train": [1, 0], "test": ["pos"]})
    with pytest.raises(DataError, match=r"label 0.5 \(float\) in split 'train', row 1"):
        labels_to_ids({"train": [1, 0.5]})
    with pytest.raises(DataError, match=r"label None \(missing\) in split 'test', row 0"):
        labels_to_ids({"train": [1, 0], "test": [None]})
    with pytest.raises(DataError, match=r"label 'meh' in split 'test', row 1 is not among the train"):
        labels_to_ids({"train": ["good", "bad"], "test": ["good", "meh"]})
    assert labels_to_ids({"train": [1.0, 0.0]}) == ({"train": [1, 0]}, ["0", "1"])


def test_labels_out_of_range(tmp_path):
    frames = reviews()
    frames["test"].loc[3, "label"] = -1
    write(tmp_path, frames, "parquet")
    with pytest.raises(DataError, match=r"label -1 in split 'test', row 3 is outside \[0, 2\)"):
        module(tmp_path).setup("fit")
    frames["test"].loc[3, "label"] = 2
    write(tmp_path, frames, "parquet")
    with pytest.raises(DataError, match=r"label 2 in split 'test', row 3 is outside \[0, 2\)"):
        module(tmp_path, num_classes=2).setup("fit")


# ---- texts, columns, splits, files: errors before training -----------------------------------
def test_missing_columns_list_the_columns_present(tmp_path):
    frames = {k: v.rename(columns={"text": "review", "label": "stars"}) for k, v in reviews().items()}
    write(tmp_path, frames, "parquet")
    with pytest.raises(
        DataError, match=r"data.text_column='text' is not a column.*columns present: \['review', 'stars'\]"
    ):
        module(tmp_path).setup("fit")
    with pytest.raises(DataError, match=r"data.label_column='label' is not a column.*\['review', 'stars'\]"):
        module(tmp_path, text_column="review").setup("fit")
    dm = module(tmp_path, text_column="review", label_column="stars")
    dm.setup("fit")
    assert len(dm.splits["test"]) == 20


def test_empty_texts_dropped_and_counted(tmp_path, caplog):
    frames = reviews()
    frames["train"].loc[[2, 5, 7], "text"] = ["", "   \n\t", None]
    write(tmp_path, frames, "parquet")
    with caplog.at_level(logging.WARNING):
        dm = module(tmp_path)
        dm.setup("fit")
    assert "split 'train': dropped 3 empty or whitespace-only texts of 60" in caplog.text
    assert len(dm.splits["train"]) + len(dm.splits["validation"]) == 56 and "removed 1 of 52 train rows" in caplog.text
    frames["test"]["text"] = " "
    write(tmp_path, frames, "parquet")
    with pytest.raises(DataError, match=r"split 'test' has no non-empty text"):
        module(tmp_path).setup("fit")


def test_non_string_text_column(tmp_path):
    write(tmp_path, reviews(), "parquet")
    with pytest.raises(DataError, match=r"data.text_column='label' holds int values \(\d\) in split 'train'"):
        module(tmp_path, text_column="label").setup("fit")


def test_no_train_split(tmp_path):
    write(tmp_path, {"test": reviews()["test"]}, "csv")
    with pytest.raises(DataError, match=r"has no train split \(splits: \['test'\]\)"):
        module(tmp_path).setup("fit")
    with pytest.raises(DataError, match=r"has no train split"):
        module(tmp_path, data_files={"test": "test.csv"}).setup("fit")


def test_bad_paths_and_unreadable_files(tmp_path):
    with pytest.raises(DataError, match=r"data.path='.*nowhere' does not exist"):
        module(tmp_path / "nowhere").setup("fit")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "reviews.csv").write_text("text,label\nok,1\n")
    with pytest.raises(DataError, match=r"no data files named by split \(found: \['reviews.csv'\]\)"):
        module(tmp_path).setup("fit")
    with pytest.raises(DataError, match=r"data.data_files.train='missing.csv': no such file"):
        module(tmp_path, data_files={"train": "missing.csv"}).setup("fit")
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "train.parquet").write_bytes(b"this is not parquet")
    with pytest.raises(DataError, match=r"train.parquet \(19 bytes\) is not a Parquet file: it starts with b'this'"):
        module(bad).setup("fit")
    with pytest.raises(DataError, match=r"needs data.path=<folder or file> or data.data_files"):
        module(None).setup("fit")


def test_max_length_below_two():
    with pytest.raises(DataError, match=r"data.max_length=1 must be a whole number >= 2 \(the \[CLS\] token"):
        ReviewDataModule(max_length=1)


# ---- splits ----------------------------------------------------------------------------------
def test_carved_validation_disjoint_stable_and_independent_of_seed(tmp_path):
    write(tmp_path, reviews(100, 10), "parquet")

    def carve(**kw):
        dm = module(tmp_path, val_fraction=0.2, **kw)
        dm.setup("fit")
        return dm.splits["train"].texts, dm.splits["validation"].texts

    train, val = carve()
    assert len(val) == 20 and len(train) == 80 and not set(train) & set(val)
    assert carve() == (train, val)
    assert carve(seed=123) == (train, val)  # the model seed does not move the validation split
    assert set(carve(split_seed=1)[1]) != set(val)


# ---- tokenizer and cache ---------------------------------------------------------------------
def test_tokenizer_saved_with_the_run_round_trips(tmp_path):
    write(tmp_path / "d", reviews(), "parquet")
    dm = module(tmp_path / "d", output_dir=str(tmp_path / "run"), max_length=12)
    dm.setup("fit")
    texts = dm.splits["test"].texts
    for reloaded in (load_tokenizer(tmp_path / "run" / "tokenizer.json"), load_tokenizer(dm.tokenizer_json())):
        ids = [e.ids for e in reloaded.encode_batch(texts)]  # truncation travels with the tokenizer
        assert ids == [row.tolist() for row in dm.splits["test"].ids]
    assert max(len(r) for r in dm.splits["test"].ids) <= 12


def test_br_tags_are_whitespace_and_cls_first():
    tok = train_tokenizer(["a good film<br />a bad film", "good bad"], vocab_size=100, min_frequency=1)
    a, b = encode(tok, ["good<br />bad", "good <br/> bad"], 16)
    assert a.tolist() == b.tolist() == encode(tok, ["good bad"], 16)[0].tolist()
    assert a[0] == 2  # [CLS]


def test_second_setup_reads_the_cache(tmp_path, monkeypatch):
    write(tmp_path / "d", reviews(), "parquet")
    cache_dir = tmp_path / "cache"
    first = module(tmp_path / "d", cache_dir=str(cache_dir))
    first.setup("fit")
    assert len(list(cache_dir.glob("ids-*.npz"))) == 3 and len(list(cache_dir.glob("tokenizer-*.json"))) == 1

    def boom(*args, **kwargs):
        raise AssertionError("tokenized again despite the cache")

    # the data module tokenizes and trains through the cache's helpers (data/cache.py)
    monkeypatch.setattr(cache_module, "encode", boom)
    monkeypatch.setattr(cache_module, "train_tokenizer", boom)
    second = module(tmp_path / "d", cache_dir=str(cache_dir))
    second.setup("fit")
    assert second.tokenizer_json() == first.tokenizer_json()
    for split in first.splits:
        assert [r.tolist() for r in second.splits[split].ids] == [r.tolist() for r in first.splits[split].ids]
    # another max_length is another key: tokenized anew
    with pytest.raises(AssertionError, match="tokenized again"):
        module(tmp_path / "d", cache_dir=str(cache_dir), max_length=7).setup("fit")


# ---- batches ---------------------------------------------------------------------------------
@pytest.mark.parametrize("bucket", [False, True])
def test_masks_match_padding_and_batches_end_at_their_longest_row(tmp_path, bucket):
    write(tmp_path, reviews(120, 30), "parquet")
    dm = module(tmp_path, bucket_by_length=bucket, batch_size=8, eval_batch_size=16)
    dm.setup("fit")
    for split, loader in (
        ("train", dm.train_dataloader()),
        ("validation", dm.val_dataloader()),
        ("test", dm.test_dataloader()),
    ):
        dataset, lengths = dm.splits[split], []
        for batch in loader:
            ids, mask = batch["input_ids"], batch["attention_mask"]
            assert mask.dtype == torch.bool and ids.dtype == torch.long and ids.shape == mask.shape
            assert (mask == (ids != dm.pad_id)).all()
            assert (ids[:, 0] == 2).all()  # [CLS] first
            assert mask[:, -1].any()  # no column of pure padding: padded to the longest row only
            assert mask.eq(torch.arange(ids.shape[1])[None, :] < mask.sum(1)[:, None]).all()  # real tokens first
            lengths += mask.sum(1).tolist()
        if split == "train":  # shuffled: the same lengths, in some order
            assert sorted(lengths) == sorted(dataset.lengths.tolist())
        else:  # one fixed shuffle of the rows
            assert lengths == dataset.lengths[loader.dataset.indices].tolist()
