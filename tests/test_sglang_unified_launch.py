"""SGLang's launch checks of ``--enable-unified-memory`` on the paths without a state pool: a
hybrid-SWA model (``_init_unified_swa_pools``, MHA or MLA) and a model with neither SWA nor state
layers (SGLang refuses it at pool construction, after these checks).

Each seeded case draws the model (full and sliding-window layers, MHA or MLA, K and V head dims
of both kinds, asymmetric ones included), ``--dcp-size``, the attention backends (unknown on some)
and PD disaggregation. SGLang's ``handle_page_major_kv_layout`` and ``handle_unified_memory_pool``
(:mod:`sglang_oracle.unified_launch`, lifted from the wheel) decide; kvbudget's
``PoolConfigurator.plan`` must refuse in their words where they refuse (under PD with DCP, by name:
SGLang refuses whatever the transfer backend), and otherwise refuse at most as SGLang's pools
do (MLA-SWA; a model that is neither hybrid). The unified Mamba pool's launch checks are
``tests/test_sglang_state_unified.py``'s and ``tests/test_sglang_unified_draft.py``'s.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

import test_sglang_state_unified as U
from sglang_oracle import state as oracle_state
from sglang_oracle._fetch import sglang_root
from sglang_oracle.unified_launch import LaunchOracle

CASES = int(os.environ.get("KVBUDGET_UNIFIED_LAUNCH_CASES", "600"))

#: SGLang's refusals at pool construction, after the launch checks (``_init_pools``).
POOLS = {"MLA-SWA": "unified memory pool does not support MLA-SWA hybrid yet",
         "neither hybrid": "--enable-unified-memory only supports hybrid Mamba and hybrid sliding-window"}  # fmt: skip


@pytest.fixture(scope="module")
def launch() -> LaunchOracle:
    return LaunchOracle(oracle_state.load(sglang_root()).b)


def case(seed: int) -> dict[str, Any]:
    """Seed ``seed``'s model and launch inputs."""
    r = random.Random(f"unified launch swa {seed}")
    mla = r.random() < 0.3
    d = r.choice((64, 128, 192, 256))
    sd = r.choice((d, d, d, 64, 128))
    dims = (d, r.choice((d, d, d, 128)), sd, r.choice((sd, sd, sd, 128)))
    tp = r.choice((1, 2, 4, 8))
    names = ("fa3", "triton", "flashinfer") if r.random() < 0.5 else U.BACKENDS  # most on the page-major lists
    return {"mla": mla, "dims": dims, "tp": tp, "full": r.randint(1, 8), "swa": r.choice((0, 0, r.randint(1, 24))),
            "dcp": 2 if tp % 2 == 0 and r.random() < 0.3 else 1,
            "backends": (r.choice(names), r.choice(names)) if r.random() < 0.5 else None,
            "disagg": r.choice(("null", "null", "null", "prefill", "decode"))}  # fmt: skip


def kvbudget_error(c: dict[str, Any]) -> tuple[str, str] | None:
    """kvbudget's refusal of ``c``'s plan (``fit="sglang"`` on 64 GiB), or ``None``."""
    import kvbudget
    from kvbudget.errors import InvalidConfigError, NotEnoughMemoryError

    d, v, sd, sv = c["dims"]
    mla = dict(kv_lora_rank=512, qk_rope_head_dim=64) if c["mla"] else {}
    b = c["backends"]
    try:
        model = kvbudget.ModelGeometry(
            full_attention_layer_ids=list(range(c["full"])),
            swa_attention_layer_ids=list(range(c["full"], c["full"] + c["swa"])), num_kv_heads=8, head_dim=d,
            v_head_dim=v, swa_head_dim=sd, swa_v_head_dim=sv, sliding_window_size=4095 if c["swa"] else None, **mla)
        serving = kvbudget.ServingConfig(
            tp_size=c["tp"], dcp_size=c["dcp"], enable_unified_memory=True, disaggregation_mode=c["disagg"],
            max_running_requests=64, prefill_attention_backend=b and b[0], decode_attention_backend=b and b[1])
        cfg = kvbudget.create_pool_configurator(model, serving, kvbudget.SpeculativeConfig())
        cfg.plan(64 << 30, fit="sglang")
    except NotEnoughMemoryError as e:
        return "memory", str(e)
    except InvalidConfigError as e:
        return "invalid", str(e)
    return None  # fmt: skip


def run_case(launch: LaunchOracle, seed: int) -> tuple[str, list[str]]:
    c = case(seed)
    err = kvbudget_error(c)
    out = U.launch_outcome(launch, {"error": err}, disagg=c["disagg"], pp=1, dcp=c["dcp"], mla=c["mla"],
                           backends=c["backends"], hybrid_swa=c["swa"] > 0, dims=c["dims"])  # fmt: skip
    if out is not None:
        return out
    kind = "SWA" if c["swa"] else "no SWA"
    if err is None:
        return f"planned ({kind})", []
    what = next((k for k, m in POOLS.items() if err[1].startswith(m)), None)
    expected = "MLA-SWA" if c["swa"] and c["mla"] else None if c["swa"] else "neither hybrid"
    return f"refused: {what}", [] if what == expected else [f"kvbudget {err} (SGLang's pools: {expected})"]


#: Every outcome the differential must reach.
REQUIRED = ("planned (SWA)", "refused: MLA-SWA", "refused: neither hybrid", "launch: page-major backends",
            "launch: dcp: MLA only", "launch: dcp: hybrid SWA", "launch: dcp: backends",
            "launch: PD with DCP (any transfer backend)")  # fmt: skip


def test_unified_launch_checks_are_sglangs(launch: LaunchOracle) -> None:
    U.run_all(lambda seed: run_case(launch, seed), CASES, REQUIRED, "unified launch cases")
