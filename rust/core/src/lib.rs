//! kvbudget-core: exact KV-cache pool planning for LLM servers.
//!
//! Pure Rust (no Python, no torch). Where a quantity lives:
//! - [`fields`]: the one declaration of every input and value type
//!   ([`for_each_value_type!`]): names, types, defaults, kinds, docs.
//! - [`dtype`]: element sizes (`b`) and storage dtypes.
//! - [`geometry`]: target and draft attention geometry and their rules.
//! - [`spec`]: speculative algorithms and the draft-layer terms `d_f`, `d_sf`, `d_c`.
//! - [`serving`]: page size, parallelism, ratio, request-cap inputs.
//! - [`scenario`]: [`Scenario`], the unit every path plans from.
//! - [`cell`]: heads per rank, bytes per token per layer (`F`, `S`), the Default cell size.
//! - [`request_cap`]: the SWA request cap and the decode allocation per request.
//! - [`fp4`]: the FP4 KV recipes (nvfp4, fp4_mx_block16): buffers and cell size.
//! - [`sizing`]: SGLang's three configurators' coefficients, the factory, both solve paths.
//! - [`configurator`]: the configurator handle (scenario, layer ids, sizing).
//! - [`batch`]: many scenarios at once (a base scenario plus varying columns).
//! - [`plan`]: the exact plan (pools, tensors, bytes), its check, and the exact fit.
//! - [`workload`]: concurrency, max context, minimum budget, the SWA ratio.
//! - [`arith`]: checked integer helpers and CPython-exact float operations.
//!
//! Units: bytes for memory, tokens for pool capacity, elements for head dims.

/// The SGLang release whose numbers the SGLang-compatible configurators give
/// (checked against its released `pool_configurator.py` on every CI run).
pub const SGLANG_VERSION: &str = "0.5.23";

pub mod arith;
pub mod batch;
pub mod cell;
pub mod configurator;
pub mod dtype;
pub mod error;
pub mod fields;
pub mod fp4;
pub mod geometry;
pub mod plan;
pub mod request_cap;
pub mod scenario;
pub mod serving;
pub mod sizing;
pub mod spec;
pub mod state;
pub mod vllm;
pub mod workload;

pub use configurator::{LayerIds, PoolConfigurator};
pub use dtype::{KvDtype, ModelDtype, StorageDtype};
pub use error::{ErrorCode, PlanError, Result};
pub use fields::{MemoryPoolConfig, Named, Resolve, ValueType};
pub use fp4::AttentionBackend;
pub use geometry::{
    AttentionShape, DraftCapacity, DraftGeometry, DsaIndexer, MlaDims, ModelGeometry,
};
pub use plan::{Fit, PoolName, PoolPlan, PoolSpec, TensorKind, TensorSpec};
pub use scenario::Scenario;
pub use serving::{DisaggregationMode, ServingConfig};
pub use sizing::{select_kind, CellSize, ConfiguratorKind, Sizing};
pub use spec::{SpecAlgorithm, SpeculativeConfig};
pub use state::StateConfig;
