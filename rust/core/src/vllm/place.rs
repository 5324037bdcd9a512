//! Formatting as vLLM's log and error texts print numbers, and the tensor
//! placement of one worker's buffer under its layout (VLLM.md section 3.5).

use super::group::{GroupSpec, IdGroup};
use super::merge::Merged;
use super::spec::Spec;
use super::{Axis, ErrorKind, KvCacheLayout, VllmError, VllmTensor};

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

/// `compute_layout_strides` for `n` layers of `s` at `num_blocks` under `layout`: each
/// logical axis' stride (`[L, B, H, N, C]`), bytes; `block_stride` fixes `B`'s. A padded
/// page (a Mamba page raised to the common one) pads the page grid, which must hold only
/// `L`, `B` and axes of one (vLLM's assert).
fn layout_strides(
    s: &Spec,
    num_blocks: u64,
    n: u64,
    layout: KvCacheLayout,
    block_stride: Option<u64>,
) -> Result<[u64; 5], VllmError> {
    let ov = || VllmError::overflow("KV cache strides");
    let content = s.checked_state_content_bytes().ok_or_else(ov)?;
    let shape = [n, num_blocks, s.num_kv_heads, s.num_states(), content];
    let order = layout.order();
    let pos = |a: Axis| order.iter().position(|&x| x == a).unwrap_or(0);
    let grid_end = pos(Axis::L).max(pos(Axis::B)) + 1;
    let padded = s.page_size_padded;
    if padded.is_some() {
        let grid: u64 = order[..grid_end]
            .iter()
            .map(|&a| shape[a as usize])
            .product();
        if Some(grid) != n.checked_mul(num_blocks) {
            return Err(VllmError::new(
                ErrorKind::AssertionError,
                format!(
                    "Page padding requires dimensions outside the page tail to be L, B, or singleton; \
                     got {} with shape ({}).",
                    layout.name(),
                    shape.map(|x| x.to_string()).join(", ")
                ),
            ));
        }
    }
    let mut strides = [0u64; 5];
    let mut current: u64 = 1;
    for (i, &a) in order.iter().enumerate().rev() {
        if let Some(p) = padded.filter(|_| i == grid_end - 1) {
            current = current.max(p);
            if !current.is_multiple_of(p) {
                return Err(VllmError::new(ErrorKind::AssertionError, String::new()));
            }
        }
        let st = match (a, block_stride) {
            (Axis::B, Some(b)) => b,
            _ => current,
        };
        strides[a as usize] = st;
        current = st.checked_mul(shape[a as usize]).ok_or_else(ov)?;
    }
    Ok(strides)
}

/// Each distinct spec of a group with its layers' names, in first-appearance order
/// (`layers_by_spec`).
fn layers_by_spec<'g>(g: &'g IdGroup, merged: &Merged) -> Vec<(&'g Spec, Vec<String>)> {
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
            let names = g
                .layers
                .iter()
                .map(|&m| merged.name(m).to_owned())
                .collect();
            by_spec.push((s, names));
        }
        GroupSpec::Single(_) => {}
    }
    by_spec
}

/// `validate_kv_cache_layout` on a worker's groups (not empty), then the stride checks
/// its first placement runs: pages of several sizes need a block-compact layout and,
/// with several groups, a block-outer one.
pub(crate) fn check_layout(
    groups: &[IdGroup],
    merged: &Merged,
    layout: KvCacheLayout,
) -> Result<(), VllmError> {
    // The worker's own layers (a group none of whose layers is here keeps the whole
    // uniform spec, which the placement below still lays out: vLLM's projection).
    let mut pages: Vec<u64> = groups
        .iter()
        .flat_map(|g| g.layers.iter().filter_map(|&m| g.spec.layer_spec(&m)))
        .map(Spec::page_size_bytes)
        .collect();
    pages.sort_unstable();
    pages.dedup();
    if pages.len() > 1
        && (!layout.is_block_compact() || (groups.len() > 1 && layout.is_layer_compact()))
    {
        let list = pages
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        return Err(VllmError::new(
            ErrorKind::ValueError,
            format!(
                "KV cache layout {} cannot express this model's mixed page sizes ([{list}]); a backend \
                 should declare block-outermost supported layouts (e.g. BLHNC), or set \
                 VLLM_KV_CACHE_LAYOUT=BLHNC.",
                layout.name()
            ),
        ));
    }
    for g in groups {
        for (s, layers) in layers_by_spec(g, merged) {
            layout_strides(s, 1, layers.len() as u64, layout, None)?;
        }
    }
    Ok(())
}

/// The worker's tensors at `num_blocks` under `layout` (every group from byte 0; a
/// block-outer layout packs each block's pages side by side, its block stride
/// `bytes_per_block`); the groups' layers named as `merged` names them.
pub(crate) fn tensors(
    groups: &[IdGroup],
    merged: &Merged,
    (bytes_per_block, num_blocks): (u64, u64),
    layout: KvCacheLayout,
) -> Result<Vec<VllmTensor>, VllmError> {
    let ov = || VllmError::overflow("KV cache buffer");
    let size = bytes_per_block.checked_mul(num_blocks).ok_or_else(ov)?;
    let outer = layout.is_block_outermost();
    let mut out = Vec::with_capacity(groups.len()); // one a group, unless uniform-type
    for g in groups {
        let mut offset: u64 = 0;
        for (s, layers) in layers_by_spec(g, merged) {
            let n = layers.len() as u64;
            let st = layout_strides(s, num_blocks, n, layout, outer.then_some(bytes_per_block))?;
            let content = s.checked_state_content_bytes().ok_or_else(ov)?;
            let layer_stride = st[Axis::L as usize];
            out.push(VllmTensor {
                size,
                layers,
                layer_stride,
                block_stride: st[Axis::B as usize],
                offset,
                shape: [num_blocks, s.num_kv_heads, s.num_states(), content],
                strides: [
                    st[Axis::B as usize],
                    st[Axis::H as usize],
                    st[Axis::N as usize],
                    1,
                ],
                dtype: s.view_dtype().to_string(),
            });
            // Block-outer layers share each block; layer-outer ones own regions.
            let step = if outer {
                s.page_size_bytes()
            } else {
                layer_stride
            };
            offset = n
                .checked_mul(step)
                .and_then(|x| x.checked_add(offset))
                .ok_or_else(ov)?;
        }
    }
    Ok(out)
}
