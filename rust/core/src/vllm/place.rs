//! Formatting as vLLM's log and error texts print numbers, and the tensor
//! placement of one worker's buffer (layer-outer `LBNHC`, VLLM.md section 3.5).

use super::group::{GroupSpec, IdGroup};
use super::merge::Merged;
use super::spec::Spec;
use super::{VllmError, VllmTensor};

/// Python's `repr` of a plain string (single quotes unless it holds one).
pub(crate) fn py_repr(s: &str) -> String {
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

/// vLLM's `format_gib`: `str(round(bytes / 2**30, 2))`.
pub(crate) fn format_gib(bytes: i128) -> String {
    let x = bytes as f64 / f64::from(1u32 << 30);
    let r: f64 = format!("{x:.2}").parse().unwrap_or(x);
    format!("{r:?}")
}

/// An integer with `,` thousands separators (Python's `f"{n:,}"`).
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The worker's tensors at `num_blocks` (layer-outer `LBNHC`; every group from
/// byte 0); the groups' layers named as `merged` names them.
pub(crate) fn tensors(
    groups: &[IdGroup],
    merged: &Merged,
    bytes_per_block: u64,
    num_blocks: u64,
) -> Result<Vec<VllmTensor>, VllmError> {
    let ov = || VllmError::overflow("KV cache buffer");
    let size = bytes_per_block.checked_mul(num_blocks).ok_or_else(ov)?;
    let mut out = Vec::with_capacity(groups.len()); // one a group, unless uniform-type
    for g in groups {
        let mut by_spec: Vec<(&Spec, Vec<String>)> = Vec::new();
        match &*g.spec {
            GroupSpec::Uniform { specs, .. } => {
                for (m, s) in specs {
                    let name = merged.name(*m).to_owned();
                    match by_spec.iter_mut().find(|(k, _)| *k == s) {
                        Some((_, layers)) => layers.push(name),
                        None => by_spec.push((s, vec![name])),
                    }
                }
            }
            GroupSpec::Single(s) if !g.layers.is_empty() => {
                by_spec.push((
                    s,
                    g.layers
                        .iter()
                        .map(|&m| merged.name(m).to_owned())
                        .collect(),
                ));
            }
            GroupSpec::Single(_) => {}
        }
        let mut offset: u64 = 0;
        for (s, layers) in by_spec {
            let block_stride = s.page_size_bytes();
            let layer_stride = block_stride.checked_mul(num_blocks).ok_or_else(ov)?;
            let n = layers.len() as u64;
            // `[B, H, N, C]`: `N` states per block (attention: one per token; a state layer: one).
            let content = s.checked_state_content_bytes().ok_or_else(ov)?;
            let heads = s.num_kv_heads;
            let n_stride = heads.checked_mul(content).ok_or_else(ov)?;
            out.push(VllmTensor {
                size,
                layers,
                layer_stride,
                block_stride,
                offset,
                shape: [num_blocks, heads, s.num_states(), content],
                strides: [block_stride, content, n_stride, 1],
                dtype: s.view_dtype().to_string(),
            });
            offset = n
                .checked_mul(layer_stride)
                .and_then(|x| x.checked_add(offset))
                .ok_or_else(ov)?;
        }
    }
    Ok(out)
}
