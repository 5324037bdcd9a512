//! vLLM plans for many budgets (and lengths) of one model: what an autoscaler re-plans.
//! The layout (specs, groups, each stage's projection) is built once per run of rows with
//! the same engine, and only the capacity step runs per row; each row's numbers are the
//! ones [`super::plan`] gives for that row's budget and engine.

use super::plan::{check_engine, with_layout};
use super::{ErrorKind, LogLine, MaxModelLen, VllmEngine, VllmError, VllmLayer};

/// A row that planned.
pub const STATUS_OK: u8 = 0;
/// vLLM fails at startup on the row's budget (no block, not one request of
/// `max_model_len`, or `"auto"` fitting not one token): `VllmStartupError`.
pub const STATUS_STARTUP: u8 = 1;
/// vLLM refuses the deployment (its `ValueError`, `NotImplementedError` or assertion).
pub const STATUS_REFUSED: u8 = 2;
/// An input the restatement does not accept (or one vLLM fails on unrelatedly).
pub const STATUS_INPUT: u8 = 3;

/// The per-row outputs (each the batch's length): `num_blocks`, `max_model_len` (tokens),
/// `max_concurrency`, `kv_cache_size_tokens` (the log's "N tokens") and `status`; a failed
/// row holds zeros and its status.
pub struct VllmBatchOut<'a> {
    pub num_blocks: &'a mut [u64],
    pub max_model_len: &'a mut [u64],
    pub max_concurrency: &'a mut [f64],
    pub kv_cache_size_tokens: &'a mut [u64],
    pub status: &'a mut [u8],
}

impl VllmBatchOut<'_> {
    fn len(&self) -> usize {
        self.status.len()
    }

    fn fail(&mut self, r: usize, status: u8) {
        self.num_blocks[r] = 0;
        self.max_model_len[r] = 0;
        self.max_concurrency[r] = 0.0;
        self.kv_cache_size_tokens[r] = 0;
        self.status[r] = status;
    }
}

fn status_of(e: &VllmError) -> u8 {
    if e.kind == ErrorKind::Input {
        STATUS_INPUT
    } else if e.is_startup() {
        STATUS_STARTUP
    } else {
        STATUS_REFUSED
    }
}

/// Plans row `r` of a batch: `available[r]` bytes for every worker, and the engine `e`
/// with `max_model_len[r]` tokens where that column is given. Fails only when the
/// columns and outputs differ in length.
pub fn plan_many(
    layers: &[VllmLayer],
    e: &VllmEngine,
    available: &[i64],
    max_model_len: Option<&[u64]>,
    out: &mut VllmBatchOut<'_>,
) -> Result<(), String> {
    let n = available.len();
    let lens = [
        max_model_len.map_or(n, <[u64]>::len),
        out.num_blocks.len(),
        out.max_model_len.len(),
        out.max_concurrency.len(),
        out.kv_cache_size_tokens.len(),
        out.len(),
    ];
    if let Some(l) = lens.iter().find(|l| **l != n) {
        return Err(format!(
            "batch columns and outputs have different lengths ({n} and {l})"
        ));
    }
    let mut start = 0;
    let mut log: Vec<LogLine> = Vec::new();
    while start < n {
        // A run of rows with one engine: its layout is built once.
        let len_of = |r: usize| max_model_len.map(|m| m[r]);
        let end = (start + 1..n)
            .find(|&r| len_of(r) != len_of(start))
            .unwrap_or(n);
        let mut engine = e.clone();
        if let Some(m) = len_of(start) {
            engine.max_model_len = MaxModelLen::Tokens(m);
        }
        log.clear();
        let run = check_engine(layers, &engine).and_then(|lengths| {
            with_layout(layers, &engine, lengths, &mut log, |lay, log| {
                // Budget-independent: vLLM checks it after the capacity step of each row.
                let aligned = lay
                    .check_prefix_alignment()
                    .and_then(|()| lay.check_placeable());
                let mut avail = vec![0i128; engine.pp as usize * engine.tp as usize];
                for (r, &budget) in available.iter().enumerate().take(end).skip(start) {
                    avail.fill(i128::from(budget));
                    log.clear();
                    let row = lay.capacity(&mut avail, log).and_then(|(blocks, m)| {
                        let concurrency = lay.concurrency(blocks, m)?;
                        aligned.clone()?;
                        Ok((blocks, m, concurrency))
                    });
                    match row {
                        Ok((blocks, m, (concurrency, tokens))) => {
                            out.num_blocks[r] = blocks;
                            out.max_model_len[r] = m;
                            out.max_concurrency[r] = concurrency;
                            out.kv_cache_size_tokens[r] = tokens;
                            out.status[r] = STATUS_OK;
                        }
                        Err(err) => out.fail(r, status_of(&err)),
                    }
                }
                Ok(())
            })
        });
        if let Err(err) = run {
            let status = status_of(&err);
            (start..end).for_each(|r| out.fail(r, status));
        }
        start = end;
    }
    Ok(())
}
