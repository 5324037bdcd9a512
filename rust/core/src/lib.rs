//! kvbudget-core: exact KV-cache pool planning for LLM servers.
//!
//! Pure Rust (no Python, no torch). Where a quantity lives:
//! - [`dtype`]: element sizes (`b`) and storage dtypes.
//! - [`geometry`]: target and draft attention geometry.
//! - [`spec`]: speculative algorithms and the draft-layer terms `d_f`, `d_sf`, `d_c`.
//! - [`serving`]: page size, parallelism, ratio, chunk-cap inputs.
//! - [`cell`]: heads per rank, bytes per token per layer (`F`, `S`), the Default cell size.
//! - [`chunk_cap`]: the SWA chunk cap and the decode allocation per request.
//! - [`configurator`]: SGLang's three configurators, the factory, both solve paths.
//! - [`plan`]: the exact plan (pools, tensors, bytes) and the exact fit.
//! - [`arith`]: checked integer helpers and CPython-exact float operations.
//!
//! Units: bytes for memory, tokens for pool capacity, elements for head dims.

pub mod arith;
pub mod batch;
pub mod cell;
pub mod chunk_cap;
pub mod configurator;
pub mod dtype;
pub mod error;
pub mod geometry;
pub mod plan;
pub mod serving;
pub mod spec;
pub mod workload;

pub use configurator::{
    select_kind, CellSize, ConfiguratorKind, MemoryPoolConfig, PoolConfigurator,
};
pub use dtype::{KvDtype, StorageDtype};
pub use error::{ErrorCode, PlanError, Result};
pub use geometry::{AttentionShape, DraftCapacity, DraftGeometry, MlaDims, ModelGeometry};
pub use plan::{Fit, PoolName, PoolPlan, PoolSpec, TensorKind, TensorSpec};
pub use serving::{DisaggregationMode, ServingConfig};
pub use spec::{SpecAlgorithm, SpeculativeConfig};
