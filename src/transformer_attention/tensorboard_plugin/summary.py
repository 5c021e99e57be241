"""The plugin's summaries: one example's page data (plotting's `page_data`, the dict the page reads) at one
step, as a blob sequence of one gzip-compressed JSON blob. TensorBoard keeps a plugin's summary only with a data
class, and a blob stays out of its message limits however long the review; the Rust data server and the Python
loader both read it through the data provider."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Mapping
from typing import Any

from tensorboard.compat.proto.summary_pb2 import DATA_CLASS_BLOB_SEQUENCE, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.types_pb2 import DT_STRING

PLUGIN_NAME = "attention"  # the tab's name, and `--samples_per_plugin=attention=0`'s
FORMAT = 1  # the blob's layout: {"format", "data"}
MAX_JSON = 256 << 20  # bytes of JSON a blob may unpack to: a 512-token page is about 10 MB


class PageError(ValueError):
    """A blob that is not a page of this plugin (truncated, corrupt, another format): one line for the tab."""


def page_summary(tag: str, page_data: Mapping[str, Any]) -> Summary:
    """`page_data` (the dict the page reads) as the plugin's summary `tag`, for a file writer's add_summary."""
    blob = gzip.compress(_json({"format": FORMAT, "data": page_data}), mtime=0)
    metadata = SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(plugin_name=PLUGIN_NAME, content=_json({"format": FORMAT})),
        data_class=DATA_CLASS_BLOB_SEQUENCE,
        summary_description=str(page_data.get("caption") or ""),
    )
    shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)])  # a sequence of one blob
    tensor = TensorProto(dtype=DT_STRING, tensor_shape=shape, string_val=[blob])
    return Summary(value=[Summary.Value(tag=tag, metadata=metadata, tensor=tensor)])


def read_page(blob: bytes) -> dict[str, Any]:
    """The page data a blob holds; a `PageError` naming what is wrong otherwise."""
    unzip = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip, bounded: a small blob may not unpack to GBs
    try:
        text = unzip.decompress(blob, MAX_JSON)
    except zlib.error as e:
        raise PageError(f"not a gzip-compressed page ({e})") from None
    if unzip.unconsumed_tail:
        raise PageError(f"unpacks to more than {MAX_JSON >> 20} MB: not a page")
    if not unzip.eof:
        raise PageError(f"truncated: {len(blob)} bytes end before the compressed page does")
    try:
        page = json.loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        raise PageError(f"not a page's JSON ({e})") from None
    if not isinstance(page, dict) or page.get("format") != FORMAT or not isinstance(page.get("data"), dict):
        raise PageError(f"not a page of format {FORMAT}: {str(page)[:60]!r}")
    data = page["data"]
    if not isinstance(data.get("layers"), dict) or not isinstance(data.get("tokens"), list):
        raise PageError("a page without its tokens or maps")
    return data


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
