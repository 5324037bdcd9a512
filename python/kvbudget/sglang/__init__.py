"""SGLang 0.5.23, the engine kvbudget's numbers follow: everything SGLang-specific.

* :mod:`.configurators`: SGLang's pool configurators (its numbers, and
  kvbudget's exact plan of the same pools): :func:`create_pool_configurator`.
* :mod:`.model`: a checkpoint as SGLang's ``ModelConfig`` resolves it
  (:func:`resolve_sglang`), with :mod:`.hybrid` (which models get separate
  full and SWA pools), :mod:`.window` (the window per model class), :mod:`.dsa`
  (the DSA indexer) and :mod:`.draft_layers` (the draft's layer classes).
* :mod:`.launch` and :mod:`.resolve`: a launch line with SGLang's flags, resolved
  as its launch resolution does (:func:`from_server_args`).
* :mod:`.budget`: SGLang's KV budget from memory measurements; :mod:`.state`
  the state cache of hybrid (Mamba, gated-delta, KDA) models it takes out first,
  :mod:`.state_model` that state read from a config (:func:`state_from_hf_config`).
* :mod:`.install`: kvbudget inside a running SGLang (:func:`install`,
  :func:`from_kvc`).

Nothing here imports SGLang or torch.
"""

from __future__ import annotations

from kvbudget.sglang.budget import sglang_available_bytes, sglang_free_gib
from kvbudget.sglang.configurators import (
    DefaultPoolConfigurator,
    HybridSWAPoolConfigurator,
    PoolConfiguratorBase,
    SWARequestCapPoolConfigurator,
    create_pool_configurator,
)
from kvbudget.sglang.hybrid import SGLangHybrid, derive_hybrid_model, sglang_hybrid_swa
from kvbudget.sglang.install import Runtime, declined, from_kvc, install, mm_reserve_bytes, scenario_from_kvc
from kvbudget.sglang.launch import SGLangLaunch, SGLangWorker, from_server_args
from kvbudget.sglang.model import SGLangModel, resolve_sglang, sglang_architectures
from kvbudget.sglang.resolve import LaunchRefused
from kvbudget.sglang.state import StateBudget, StateCacheTooSmallError, state_budget
from kvbudget.sglang.state_model import state_from_hf_config

__all__ = [
    "DefaultPoolConfigurator",
    "HybridSWAPoolConfigurator",
    "LaunchRefused",
    "PoolConfiguratorBase",
    "Runtime",
    "SGLangHybrid",
    "SGLangLaunch",
    "SGLangModel",
    "SGLangWorker",
    "StateBudget",
    "StateCacheTooSmallError",
    "SWARequestCapPoolConfigurator",
    "create_pool_configurator",
    "declined",
    "derive_hybrid_model",
    "from_kvc",
    "from_server_args",
    "install",
    "mm_reserve_bytes",
    "resolve_sglang",
    "scenario_from_kvc",
    "sglang_architectures",
    "sglang_available_bytes",
    "sglang_free_gib",
    "sglang_hybrid_swa",
    "state_budget",
    "state_from_hf_config",
]
