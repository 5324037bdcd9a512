//! vLLM 0.33.0's capacity step on a deployment's layout ([`Layout`]): the overrides,
//! `--max-model-len auto`, the admission check of one request, the blocks every worker
//! allocates, the scheduler's concurrency, and the plan a budget gives (VLLM.md 5-7).

use super::group::{GroupSpec, IdGroup};
use super::place::{check_layout, format_gib, tensors, thousands};
use super::plan::{gcd, out_group, Layout};
use super::scheduler::cache_block_size;
use super::{ErrorKind, LogLine, VllmError, VllmPlan, VllmWorker};

impl Layout<'_, '_> {
    fn no_layers(w: usize) -> VllmError {
        VllmError::new(
            ErrorKind::Input,
            format!("worker {w} holds no KV-cache layers (vLLM divides by zero)"),
        )
    }

    /// vLLM's capacity step on each worker's budget `avail` (bytes; overwritten by the
    /// engine's overrides): `(num_blocks, max_model_len)` after auto-fit and the admission
    /// check of one request, or vLLM's startup failure.
    pub(crate) fn capacity(
        &self,
        avail: &mut [i128],
        log: &mut Vec<LogLine>,
    ) -> Result<(u64, u64), VllmError> {
        let (e, ctx) = (self.e, &self.ctx);
        if let Some(b) = e.kv_cache_memory_bytes.filter(|&b| b > 0) {
            avail.fill(i128::from(b));
        }
        // Each worker's first placement (the block-size probe) validates the layout: in the
        // override's loop, before its log line, else before anything else logs.
        let probe = |w: usize| match &ctx.worker(w).groups {
            g if g.is_empty() => Ok(()),
            g => check_layout(g, self.merged, e.kv_cache_layout),
        };
        if e.num_gpu_blocks_override.is_none() {
            (0..avail.len()).try_for_each(probe)?;
        }
        if let Some(o) = e.num_gpu_blocks_override {
            for (w, a) in avail.iter_mut().enumerate() {
                probe(w)?;
                let b = i128::from(ctx.worker(w).bytes_per_block);
                if b == 0 {
                    return Err(Self::no_layers(w));
                }
                log.push(LogLine::info(format!(
                    "Overriding num_gpu_blocks={} with num_gpu_blocks_override={o}",
                    a.div_euclid(b)
                )));
                *a = i128::from(o) * b;
            }
        }
        let check = |w: usize| avail[w] - i128::from(ctx.worker(w).bytes_per_block);
        let mut max_model_len = self.start_len;
        if self.auto_fit {
            let derived = self.start_len;
            let mut fit = derived;
            let mut limiting = check(0);
            for w in 0..avail.len() {
                let c = check(w);
                let wm = ctx.estimate(w, c, derived)?;
                if wm < fit {
                    fit = wm;
                    limiting = c;
                }
            }
            if fit == 0 {
                return Err(VllmError::new(
                    ErrorKind::ValueError,
                    "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. Try increasing `gpu_memory_utilization`.",
                ));
            }
            let mem = format!("{} GiB GPU", format_gib(limiting));
            if fit >= derived {
                log.push(LogLine::info(format!("Auto-fit max_model_len: full model context length {derived} fits in available KV cache memory ({mem})")));
            } else {
                max_model_len = fit;
                log.push(LogLine::info(format!("Auto-fit max_model_len: reduced from {derived} to {fit} to fit in available KV cache memory ({mem})")));
            }
        }
        // Admission: one request of max_model_len per worker, the null block held back.
        for w in 0..avail.len() {
            let c = check(w);
            if c <= 0 {
                return Err(VllmError::new(ErrorKind::ValueError, "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."));
            }
            let needed = ctx.per_request(w, max_model_len)?;
            if needed > c {
                let est = ctx.estimate(w, c, max_model_len)?;
                let est_msg = if est > 0 {
                    format!(
                        "Based on the available memory, the estimated maximum model length is {est}. "
                    )
                } else {
                    String::new()
                };
                let mut err = VllmError::new(ErrorKind::ValueError, format!(
                    "To serve at least one request with the model's max seq len ({max_model_len}), ({} GiB KV cache is needed, which is larger than the available KV cache memory ({} GiB). {est_msg}Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
                    format_gib(needed), format_gib(c)));
                err.estimated_max_model_len = (est > 0).then_some(est);
                return Err(err);
            }
        }
        let mut num_blocks = u64::MAX;
        for (w, a) in avail.iter().enumerate() {
            let wk = ctx.worker(w);
            if wk.bytes_per_block == 0 {
                return Err(Self::no_layers(w));
            }
            let n = e
                .num_gpu_blocks_override
                .unwrap_or_else(|| a.div_euclid(i128::from(wk.bytes_per_block)) as u64);
            num_blocks = num_blocks.min(n);
        }
        Ok((num_blocks, max_model_len))
    }

    /// Blocks one request of `max_model_len` takes from each of the scheduler's groups
    /// (worker 0's, a uniform group reduced to its first layer).
    fn blocks_per_request(
        &self,
        max_model_len: u64,
    ) -> impl Iterator<Item = Result<u64, VllmError>> + '_ {
        self.ctx.stages[0].groups.iter().map(move |g| {
            g.spec.first_spec().pages_per_request(
                max_model_len,
                self.ctx.in_flight,
                self.e.dcp,
                self.ctx.encoder_tokens,
            )
        })
    }

    /// `(max_concurrency, kv_cache_size_tokens)`: `num_blocks` over one request's blocks, and
    /// that times `max_model_len` (the log's "N tokens", truncated).
    pub(crate) fn concurrency(
        &self,
        num_blocks: u64,
        max_model_len: u64,
    ) -> Result<(f64, u64), VllmError> {
        let mut total = 0u64;
        for b in self.blocks_per_request(max_model_len) {
            total += b?;
        }
        let max_concurrency = num_blocks as f64 / total as f64;
        Ok((
            max_concurrency,
            (max_concurrency * max_model_len as f64) as u64,
        ))
    }

    /// The workers' allocation: a packed group none of whose layers is on a stage keeps its
    /// whole uniform spec there, whose layers the stage's placement lays out; vLLM's
    /// `allocate_kv_cache` then finds no group of the worker's own holding them and fails.
    pub(crate) fn check_placeable(&self) -> Result<(), VllmError> {
        let foreign = |g: &IdGroup| {
            g.layers.is_empty()
                && matches!(&*g.spec, GroupSpec::Uniform { specs, .. } if !specs.is_empty())
        };
        match self.ctx.stages.iter().position(|st| st.groups.iter().any(foreign)) {
            None => Ok(()),
            Some(stage) => Err(VllmError::new(
                ErrorKind::Input,
                format!(
                    "pipeline stage {stage} holds none of a packed KV-cache group's layers: vLLM 0.33.0 \
                     still places that group's layers in the stage's buffer, and its workers then fail to \
                     allocate the KV cache (StopIteration in allocate_kv_cache)"
                ),
            )),
        }
    }

    /// The plan at `num_blocks` and `max_model_len`: every worker's tensors and groups, the
    /// scheduler's view and the capacity log line.
    pub(super) fn result(
        &self,
        num_blocks: u64,
        max_model_len: u64,
        log: &mut Vec<LogLine>,
    ) -> Result<VllmPlan, VllmError> {
        let (e, ctx, merged) = (self.e, &self.ctx, self.merged);
        let workers = e.pp as usize * e.tp as usize;
        let mut out_workers = Vec::with_capacity(workers);
        for w in 0..workers {
            let wk = ctx.worker(w);
            let t = tensors(
                &wk.groups,
                merged,
                (wk.bytes_per_block, num_blocks),
                e.kv_cache_layout,
            )?;
            let per_request = u64::try_from(ctx.per_request(w, max_model_len)?)
                .map_err(|_| VllmError::overflow("per-request bytes"))?;
            out_workers.push(VllmWorker {
                bytes_per_block: wk.bytes_per_block,
                per_request_bytes: per_request,
                allocated_bytes: wk.bytes_per_block * num_blocks,
                tensors: t,
                groups: wk
                    .groups
                    .iter()
                    .map(|g| out_group(g, merged, Some(wk.bytes_per_block)))
                    .collect(),
            });
        }
        let w0: &[IdGroup] = &ctx.stages[0].groups;
        let replicas = w0
            .iter()
            .flat_map(|g| g.spec.iter_specs())
            .fold(e.tp, |acc, s| {
                let r = match s.max_tp_shards {
                    None => 1,
                    Some(_) if e.dcp > 1 => 1,
                    Some(shards) => (e.tp / shards).max(1),
                };
                gcd(acc, r)
            });
        let blocks_per_request = self
            .blocks_per_request(max_model_len)
            .collect::<Result<Vec<u64>, VllmError>>()?;
        let (max_concurrency, kv_cache_size_tokens) =
            self.concurrency(num_blocks, max_model_len)?;
        let cache_block_size = cache_block_size(w0).unwrap_or(e.block_size);
        log.push(LogLine::info(format!(
            "GPU KV cache size: {} tokens, Maximum concurrency for {} tokens per request: {max_concurrency:.2}x",
            thousands(kv_cache_size_tokens),
            thousands(max_model_len)
        )));
        self.check_prefix_alignment()?;
        self.check_placeable()?;
        Ok(VllmPlan {
            num_blocks,
            max_model_len,
            workers: out_workers,
            groups: self
                .global
                .iter()
                .map(|g| out_group(g, merged, None))
                .collect(),
            blocks_per_request,
            max_concurrency,
            kv_cache_size_tokens,
            kv_tp_replicas: replicas,
            cache_block_size,
            mamba: self.hybrid.clone(),
            warnings: log
                .iter()
                .filter(|l| l.level == "warning")
                .map(|l| l.message.clone())
                .collect(),
            log: std::mem::take(log),
        })
    }
}
