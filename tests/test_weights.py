"""``kvbudget.models.weight_bytes``: a checkpoint's weight bytes, exact or estimated.

The exact routes are checked against files written two ways (by hand, byte by
byte, and by the ``safetensors`` library from real tensors); the estimate
against a second route: the model transformers builds from the same config on
the meta device, its parameters' ``numel`` summed.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from kvbudget.models import ConfigError, WeightEstimate, weight_bytes
from kvbudget.models.weights import DTYPE_BYTES, parameter_count

torch = pytest.importorskip("torch")
T = pytest.importorskip("transformers")


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> int:
    """A safetensors file by hand: ``{name: (dtype, shape, bytes per element)}``; returns the data bytes."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, size) in tensors.items():
        n = size
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return offset


def test_the_index_total_size(tmp_path: Path) -> None:
    index = {"metadata": {"total_size": 16_060_522_496},
             "weight_map": {"model.embed_tokens.weight": "model-00001-of-00004.safetensors"}}  # fmt: skip
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    _write_safetensors(tmp_path / "model-00001-of-00004.safetensors", {"x": ("F32", [3], 4)})  # not read
    (tmp_path / "config.json").write_text("{}")
    got = weight_bytes(tmp_path)
    assert (got.bytes, got.source, got.exact, got.parameters) == (16_060_522_496, "safetensors index", True, None)
    assert got.describe() == "14.96 GiB (safetensors index, exact)"
    assert weight_bytes(tmp_path / "model.safetensors.index.json") == got


def test_a_hand_written_safetensors_header(tmp_path: Path) -> None:
    want = _write_safetensors(tmp_path / "model.safetensors",
                              {"a": ("F32", [2, 3], 4), "b": ("BF16", [4], 2), "c": ("I8", [5, 1], 1)})  # fmt: skip
    assert want == 24 + 8 + 5
    got = weight_bytes(tmp_path)
    assert (got.bytes, got.parameters, got.source, got.exact) == (want, 6 + 4 + 5, "safetensors headers", True)
    assert weight_bytes(tmp_path / "model.safetensors") == got


def test_safetensors_written_by_the_library_shards_summed(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    shards = [{"w": torch.zeros(7, 3, dtype=torch.bfloat16), "b": torch.zeros(11)},
              {"e": torch.zeros(2, 2, 2, dtype=torch.float16), "s": torch.zeros((), dtype=torch.float64)}]  # fmt: skip
    for i, tensors in enumerate(shards):
        save_file(tensors, str(tmp_path / f"model-{i:05d}.safetensors"))
    want = sum(t.numel() * t.element_size() for s in shards for t in s.values())
    got = weight_bytes(tmp_path)
    assert got.bytes == want and got.parameters == sum(t.numel() for s in shards for t in s.values())
    assert len(got.files) == 2


@pytest.mark.parametrize("content", [b"", b"version https://git-lfs.github.com/spec/v1\noid sha256:ab\n"])
def test_a_file_that_is_no_safetensors_is_refused(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "model.safetensors").write_bytes(content)
    with pytest.raises(ConfigError, match="model.safetensors"):
        weight_bytes(tmp_path)


def test_a_truncated_safetensors_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    _write_safetensors(path, {"a": ("F32", [1024], 4)})
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(ConfigError, match="places tensors up to"):
        weight_bytes(path)


def _meta_parameters(config: Any) -> int:
    with torch.device("meta"):
        model = T.AutoModelForCausalLM.from_config(config)
    return int(sum(p.numel() for p in model.parameters()))


SMALL = dict(vocab_size=3001, hidden_size=96, intermediate_size=200, num_hidden_layers=3, num_attention_heads=6)
CONFIGS = {
    "llama-gqa": lambda: T.LlamaConfig(**SMALL, num_key_value_heads=2, torch_dtype="bfloat16"),
    "llama-tied-bias-fp32": lambda: T.LlamaConfig(**SMALL, num_key_value_heads=3, attention_bias=True,
                                                  tie_word_embeddings=True, torch_dtype="float32"),
    "qwen2": lambda: T.Qwen2Config(**SMALL, num_key_value_heads=2, torch_dtype="float16"),
    "qwen3": lambda: T.Qwen3Config(**SMALL, num_key_value_heads=2, head_dim=40, torch_dtype="bfloat16"),
    "mixtral": lambda: T.MixtralConfig(**SMALL, num_key_value_heads=2, num_local_experts=4, torch_dtype="bfloat16"),
    "qwen2-moe": lambda: T.Qwen2MoeConfig(**SMALL, num_key_value_heads=2, num_experts=6, moe_intermediate_size=48,
                                          shared_expert_intermediate_size=80, torch_dtype="bfloat16"),
    "qwen3-moe-sparse-step": lambda: T.Qwen3MoeConfig(**{**SMALL, "num_hidden_layers": 5}, num_key_value_heads=2,
                                                      num_experts=4, moe_intermediate_size=32, head_dim=16,
                                                      decoder_sparse_step=2, mlp_only_layers=[3],
                                                      torch_dtype="bfloat16"),
    "deepseek-v3-mla": lambda: T.DeepseekV3Config(**SMALL, moe_intermediate_size=32, first_k_dense_replace=1,
                                                  n_routed_experts=4, n_shared_experts=2, num_key_value_heads=6,
                                                  q_lora_rank=40, kv_lora_rank=24, qk_rope_head_dim=8,
                                                  qk_nope_head_dim=16, v_head_dim=20, num_experts_per_tok=2,
                                                  n_group=1, topk_group=1, torch_dtype="bfloat16"),
    "deepseek-v3-no-q-lora": lambda: T.DeepseekV3Config(**SMALL, moe_intermediate_size=32, n_routed_experts=4,
                                                        num_key_value_heads=6, q_lora_rank=None, kv_lora_rank=24,
                                                        qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=20,
                                                        num_experts_per_tok=2, n_group=1, topk_group=1,
                                                        torch_dtype="bfloat16"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_estimate_counts_what_transformers_builds(tmp_path: Path, name: str) -> None:
    config = CONFIGS[name]()
    config.architectures = [T.AutoModelForCausalLM._model_mapping[type(config)].__name__]
    config.save_pretrained(tmp_path)  # the config.json transformers writes (defaults left out)
    got = weight_bytes(tmp_path)
    params = _meta_parameters(config)
    dtype = json.loads((tmp_path / "config.json").read_text()).get("dtype") or config.dtype
    dtype = str(dtype).removeprefix("torch.")
    assert (got.source, got.exact, got.parameters, got.dtype) == ("parameter count estimate", False, params, dtype)
    assert got.bytes == params * DTYPE_BYTES[dtype]
    assert got.describe().startswith("~") and "estimate" in got.describe()


def test_the_estimate_states_its_assumptions(tmp_path: Path) -> None:
    cfg = {**SMALL, "model_type": "llama", "quantization_config": {"quant_method": "fp8"}}
    got = weight_bytes(cfg)
    assert got.dtype == "bfloat16" and got.bytes == 2 * parameter_count(cfg)
    assert any("priced at bfloat16" in n for n in got.notes) and any("quantized" in n for n in got.notes)
    nested = weight_bytes({"model_type": "llava", "torch_dtype": "float16", "text_config": SMALL})
    assert nested.bytes == 2 * parameter_count(SMALL) and any("text model only" in n for n in nested.notes)


def test_the_estimate_names_what_it_lacks() -> None:
    with pytest.raises(ConfigError, match="'vocab_size'") as e:
        weight_bytes({k: v for k, v in SMALL.items() if k != "vocab_size"})
    assert e.value.key == "vocab_size"
    with pytest.raises(ConfigError, match="dtype 'int3'"):
        weight_bytes({**SMALL, "torch_dtype": "int3"})
    with pytest.raises(ConfigError, match="hidden_size"):
        weight_bytes({**SMALL, "hidden_size": 9.5})


def test_the_sglang_launch_reads_the_model_folders_weights(tmp_path: Path) -> None:
    from kvbudget.sglang.install import from_server_args

    config = T.LlamaConfig(**SMALL, num_key_value_heads=2, torch_dtype="bfloat16")
    config.architectures = ["LlamaForCausalLM"]
    config.save_pretrained(tmp_path)
    launch = from_server_args(["--model-path", str(tmp_path), "--page-size", "1"])
    got = launch.weights()
    assert isinstance(got, WeightEstimate) and got == weight_bytes(tmp_path) and not got.exact


def test_the_cli_states_the_weights_it_did_not_subtract(tmp_path: Path) -> None:
    from cli_helpers import run

    config = T.LlamaConfig(**SMALL, num_key_value_heads=2, torch_dtype="bfloat16")
    config.architectures = ["LlamaForCausalLM"]
    config.save_pretrained(tmp_path)
    line = f"--model-path {tmp_path} --tp 2 --page-size 16"
    r = run("plan", "--sglang", line, "--gpu", "h100-sxm-80gb")
    assert r.returncode == 0, r.stderr
    notes = [n for n in r.stdout.splitlines() if n.strip().startswith("note: the model's weights")]
    assert len(notes) == 1 and weight_bytes(tmp_path).describe() in notes[0] and "--tp 2" in notes[0], r.stdout
    with_weights = run("plan", "--sglang", line, "--gpu", "h100-sxm-80gb", "--weights-gib", "1")
    assert with_weights.returncode == 0 and "the model's weights" not in with_weights.stdout
