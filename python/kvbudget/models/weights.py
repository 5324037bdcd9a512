"""How many bytes a checkpoint's weights take: :func:`weight_bytes`.

Three sources, tried in this order for a model folder:

1. ``model.safetensors.index.json``: its ``metadata.total_size`` (the bytes of
   every tensor, as the checkpoint's writer summed them). Exact for the files.
2. ``*.safetensors`` without an index: each file's header (an 8-byte
   little-endian length, then that many bytes of JSON naming every tensor's
   ``dtype``, ``shape`` and ``data_offsets``), summed ``end - begin`` over the
   tensors. Exact, and cheap: only the headers are read.
3. ``config.json`` alone: an **estimate**, the parameter count the config
   implies (:func:`parameter_count`) times the bytes of its ``torch_dtype`` /
   ``dtype``.

"Exact" means the checkpoint's own tensor bytes. What a server holds can
differ: a float32 checkpoint SGLang serves in bfloat16 (``--dtype auto``) takes
half, a tensor-parallel rank about ``1 / tp`` of it, and a multimodal model's
vision tower counts in the files but not in the estimate (which prices the text
model only). Nothing here imports torch.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from kvbudget.models.hf import ConfigError, PathOrDict, config_dtype, load_hf_config, text_part

__all__ = ["DTYPE_BYTES", "WeightEstimate", "WeightSource", "parameter_count", "weight_bytes"]

WeightSource = Literal["safetensors index", "safetensors headers", "parameter count estimate"]

#: Bytes per parameter of the dtype names configs use (``torch_dtype`` / ``dtype``).
DTYPE_BYTES: Final[dict[str, int]] = {
    "float64": 8, "double": 8, "float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1,
}  # fmt: skip
#: The largest index file read (DeepSeek-V3's is about 9 MB).
MAX_INDEX_BYTES: Final = 64 << 20
#: The largest safetensors header read (the format's own limit).
MAX_HEADER_BYTES: Final = 100_000_000
_GIB: Final = 1 << 30


@dataclass(frozen=True)
class WeightEstimate:
    """A checkpoint's weight bytes and where the number comes from.

    Attributes:
        bytes: the weights' bytes (all ranks together).
        source: ``"safetensors index"``, ``"safetensors headers"`` or
            ``"parameter count estimate"``.
        exact: True for the two safetensors sources; False for the estimate.
        parameters: the parameter count (the headers' element count, or the
            estimate's); None from an index.
        dtype: the dtype the estimate priced every parameter at (None otherwise).
        files: the files read.
        notes: what the estimate assumed or left out.
    """

    bytes: int
    source: WeightSource
    exact: bool
    parameters: int | None = None
    dtype: str | None = None
    files: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line: ``"14.96 GiB (safetensors index, exact)"``, or for the estimate
        ``"~14.96 GiB (an estimate: 8,030,261,248 parameters x 2 bytes bfloat16)"``."""
        gib = f"{self.bytes / _GIB:.2f} GiB"
        if self.exact:
            return f"{gib} ({self.source}, exact)"
        per = DTYPE_BYTES.get(self.dtype or "", 0)
        return f"~{gib} (an estimate: {self.parameters or 0:,} parameters x {per} bytes {self.dtype})"


def _read_capped(path: Path, cap: int) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(cap + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > cap:
        raise ConfigError(f"{path}: larger than {cap >> 20} MiB")
    return data


def _count(value: Any, what: str) -> int:
    """A non-negative integer (an integral float, as some index writers store ``total_size``, too)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{what}: expected a non-negative integer, got {value!r}")
    return value


def _from_index(path: Path) -> WeightEstimate:
    try:
        doc = json.loads(_read_capped(path, MAX_INDEX_BYTES).decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ConfigError(f"{path}: not a JSON index ({exc})") from None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(meta, dict) or "total_size" not in meta:
        raise ConfigError(f"{path}: no metadata.total_size")
    total = _count(meta["total_size"], f"{path}: metadata.total_size")
    return WeightEstimate(total, "safetensors index", True, files=(str(path),))


def _header(path: Path) -> tuple[int, int]:
    """``(tensor bytes, elements)`` of one safetensors file, from its header."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ConfigError(f"{path}: shorter than a safetensors header")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise ConfigError(f"{path}: header length {n} is over the format's limit (a Git LFS pointer?)")
            raw = f.read(n)
            size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ConfigError(f"{path}: not a safetensors header ({exc})") from None
    if len(raw) < n or not isinstance(header, dict):
        raise ConfigError(f"{path}: truncated or malformed safetensors header")
    total = elements = end_max = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and isinstance(shape, list)):
            raise ConfigError(f"{path}: tensor {name!r} has no data_offsets / shape")
        begin, end = (_count(o, f"{path}: {name} data_offsets") for o in offsets)
        if end < begin:
            raise ConfigError(f"{path}: tensor {name!r} ends before it begins")
        total += end - begin
        elements += math.prod(_count(d, f"{path}: {name} shape") for d in shape)
        end_max = max(end_max, end)
    if size < 8 + n + end_max:
        raise ConfigError(f"{path}: {size} bytes, but its header places tensors up to {8 + n + end_max}")
    return total, elements


def _from_headers(paths: Sequence[Path]) -> WeightEstimate:
    total = elements = 0
    for p in paths:
        t, e = _header(p)
        total, elements = total + t, elements + e
    return WeightEstimate(total, "safetensors headers", True, parameters=elements, files=tuple(map(str, paths)))


_REQUIRED: Final = object()


def _int(cfg: Mapping[str, Any], key: str, default: Any = _REQUIRED) -> int:
    value = cfg.get(key)
    if value is None:
        if default is _REQUIRED:
            raise ConfigError(f"config.json: no {key!r}, which the parameter count needs", key=key)
        return _int({key: default}, key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"config.json: {key}={value!r}: expected a non-negative integer", key=key)
    return value


def _attention(t: Mapping[str, Any], h: int, model_type: str) -> int:
    """One layer's attention parameters (MLA when ``kv_lora_rank`` is set)."""
    heads = _int(t, "num_attention_heads")
    if t.get("kv_lora_rank") is not None:
        rank, rope, nope = _int(t, "kv_lora_rank"), _int(t, "qk_rope_head_dim"), _int(t, "qk_nope_head_dim")
        v, q_rank = _int(t, "v_head_dim"), _int(t, "q_lora_rank", 0)
        # q_a_proj, q_a_layernorm, q_b_proj; or one q_proj without a q LoRA rank
        q = h * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank else h * heads * (nope + rope)
        return q + h * (rank + rope) + rank + rank * heads * (nope + v) + heads * v * h
    kv = _int(t, "num_key_value_heads", heads)
    hd = _int(t, "head_dim", h // heads if heads else 0)
    n = h * (heads + 2 * kv) * hd + heads * hd * h
    if t.get("attention_bias") is True:  # q, k, v and o biases (Llama's attention_bias)
        n += (heads + 2 * kv) * hd + h
    elif model_type in ("qwen2", "qwen2_moe"):  # q, k, v biases, always
        n += (heads + 2 * kv) * hd
    if model_type in ("qwen3", "qwen3_moe"):  # per-head q and k RMSNorms
        n += 2 * hd
    return n


def _moe_layer(t: Mapping[str, Any], i: int) -> bool:
    dense = t.get("mlp_only_layers") or ()
    return (i >= _int(t, "first_k_dense_replace", 0) and i not in dense
            and (i + 1) % max(1, _int(t, "decoder_sparse_step", 1)) == 0
            and i % max(1, _int(t, "moe_layer_freq", 1)) == 0)  # fmt: skip


def parameter_count(config: PathOrDict) -> int:
    """The parameters of a decoder-only model's text config, by formula (an estimate).

    ``V`` vocab_size, ``H`` hidden_size, ``L`` num_hidden_layers, ``I``
    intermediate_size:

    * embeddings ``V*H``, plus ``lm_head`` ``V*H`` unless ``tie_word_embeddings``
      (absent: False, True for the ``gemma*`` model types); final norm ``H``;
    * per layer, two norms ``2H`` and the attention: ``q``/``k``/``v``/``o`` =
      ``H*(heads + 2*kv_heads)*head_dim + heads*head_dim*H`` (biases with
      ``attention_bias``, Qwen2's q/k/v biases, Qwen3's per-head q/k norms); MLA
      (``kv_lora_rank`` set) as DeepSeek's: ``q_a``/``q_a_norm``/``q_b`` (or one
      ``q_proj`` without ``q_lora_rank``), ``kv_a_proj_with_mqa``, ``kv_a_norm``,
      ``kv_b_proj``, ``o_proj``;
    * per layer, a gated MLP ``3*H*I``, or on an MoE layer (experts from
      ``n_routed_experts`` / ``num_experts`` / ``num_local_experts``; dense are
      the first ``first_k_dense_replace``, ``mlp_only_layers``, and those off
      ``decoder_sparse_step`` / ``moe_layer_freq``) ``E*3*H*I_e`` with ``I_e``
      ``moe_intermediate_size`` (else ``I``), the router ``H*E``, and shared
      experts: ``n_shared_experts*3*H*I_e`` or, with
      ``shared_expert_intermediate_size`` ``S``, ``3*H*S + H`` (its gate).

    Not counted: vision/audio towers, MTP/next-n layers, router score biases
    and other per-architecture extras; a quantized checkpoint's scales.

    Raises:
        ConfigError: a key the formula needs is missing or not an integer.
    """
    cfg = load_hf_config(config)
    t = text_part(cfg)
    model_type = str(t.get("model_type") or cfg.get("model_type") or "")
    h, layers, vocab = _int(t, "hidden_size"), _int(t, "num_hidden_layers"), _int(t, "vocab_size")
    tied = t.get("tie_word_embeddings", cfg.get("tie_word_embeddings"))
    if tied is None:
        tied = model_type.startswith("gemma")
    n = vocab * h * (1 if tied else 2) + h
    experts = next((_int(t, k) for k in ("n_routed_experts", "num_experts", "num_local_experts") if t.get(k)), 0)
    attention = _attention(t, h, model_type)
    for i in range(layers):
        n += 2 * h + attention
        if experts and _moe_layer(t, i):
            inner = _int(t, "moe_intermediate_size", t.get("intermediate_size"))
            n += experts * 3 * h * inner + h * experts
            n += _int(t, "n_shared_experts", 0) * 3 * h * inner
            shared = _int(t, "shared_expert_intermediate_size", 0)
            n += 3 * h * shared + h if shared else 0
        else:
            n += 3 * h * _int(t, "intermediate_size")
    return n


def _estimate(cfg: dict[str, Any], files: tuple[str, ...]) -> WeightEstimate:
    t = text_part(cfg)
    name = config_dtype(cfg)
    notes = ["an estimate from the config's parameter count (kvbudget.models.weights.parameter_count)"]
    if name is None:
        name = "bfloat16"
        notes.append("the config names no torch_dtype / dtype: priced at bfloat16")
    dtype = str(name).removeprefix("torch.")
    if dtype not in DTYPE_BYTES:
        raise ConfigError(f"config.json: dtype {name!r}: kvbudget knows the sizes of {sorted(DTYPE_BYTES)}")
    if t is not cfg:
        notes.append("the text model only (no vision / audio tower)")
    if cfg.get("quantization_config") is not None or t.get("quantization_config") is not None:
        notes.append("the config is quantized: every parameter is priced at the dtype, not the quantized format")
    params = parameter_count(cfg)
    return WeightEstimate(params * DTYPE_BYTES[dtype], "parameter count estimate", False, parameters=params,
                          dtype=dtype, files=files, notes=tuple(notes))  # fmt: skip


def weight_bytes(path_or_config: PathOrDict) -> WeightEstimate:
    """A checkpoint's weight bytes: exact from its safetensors files, else estimated from its config.

    ``path_or_config`` is a model folder (``model.safetensors.index.json``, else
    every ``*.safetensors`` header, else ``config.json``: see the module), one
    ``*.safetensors`` / ``*.safetensors.index.json`` file, a ``config.json``
    path, or a config dict (estimated). Check :attr:`WeightEstimate.exact`:
    the parameter-count route is an estimate.

    Raises:
        ConfigError: a file is unreadable or malformed, or the config lacks what
            the estimate needs.
    """
    if isinstance(path_or_config, Mapping):
        return _estimate(dict(path_or_config), ())
    if not isinstance(path_or_config, (str, os.PathLike)):
        raise ConfigError(f"expected a model folder, a file or a config dict, got {type(path_or_config).__name__}")
    path = Path(path_or_config)
    if path.is_dir():
        index = path / "model.safetensors.index.json"
        if index.is_file():
            return _from_index(index)
        shards = sorted(p for p in path.glob("*.safetensors") if p.is_file())
        if shards:
            return _from_headers(shards)
        return _estimate(load_hf_config(path), (str(path / "config.json"),))
    if path.name.endswith(".safetensors.index.json"):
        return _from_index(path)
    if path.suffix == ".safetensors":
        return _from_headers([path])
    return _estimate(load_hf_config(path), (str(path),))
