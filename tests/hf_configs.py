"""Small Hugging Face configs shared by tests (tests/ is on sys.path, see conftest.py)."""

from __future__ import annotations

from typing import Any

#: A 2-layer Llama: 32 query heads, 8 KV heads, hidden 4096 (head_dim 128 derived).
LLAMA_2_LAYERS: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 2,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
}
