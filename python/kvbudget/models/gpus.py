"""GPU presets: total device memory as the vendors state it.

``memory_bytes`` is the figure to plan with. Each preset says how it was
obtained in ``bytes_basis``:

* ``"stated_gb_x_1e9"``: the vendor's stated capacity in (decimal) GB times
  10**9. The bytes a device reports (``cudaMemGetInfo`` total,
  ``torch.cuda.get_device_properties(...).total_memory``, ``nvidia-smi``) differ
  from this, usually by a few percent, and also by driver and ECC setting.
* ``"device_reported"``: a total the device itself reported, recorded with
  where it was read. No preset uses this yet: kvbudget has not measured these
  devices, and it does not copy unverified figures.

This is the card's total memory, not the KV budget: REFERENCE section 4 says
how an engine turns it into available bytes (weights, activations, a memory
fraction).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Final, Literal

from kvbudget.errors import UnknownNameError

__all__ = ["GpuSpec", "UnknownGpuError", "get_gpu", "list_gpus", "GPUS"]

BytesBasis = Literal["stated_gb_x_1e9", "device_reported"]


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator's memory as its vendor states it.

    Attributes:
        name: preset name, e.g. ``"h100-sxm-80gb"``.
        vendor: ``"NVIDIA"`` or ``"AMD"``.
        model: the vendor's product name.
        memory_type: e.g. ``"HBM3"``.
        stated_memory_gb: capacity in GB as the vendor states it.
        memory_bytes: bytes to plan with (see ``bytes_basis``).
        bytes_basis: how ``memory_bytes`` was obtained.
        source: the vendor document the capacity comes from.
        aliases: other names ``get_gpu`` accepts.
        notes: caveats.
    """

    name: str
    vendor: str
    model: str
    memory_type: str
    stated_memory_gb: int
    memory_bytes: int
    bytes_basis: BytesBasis
    source: str
    aliases: tuple[str, ...] = ()
    notes: str = ""


def _stated(
    name: str,
    vendor: str,
    model: str,
    memory_type: str,
    gb: int,
    source: str,
    aliases: tuple[str, ...],
    notes: str = "",
) -> GpuSpec:
    return GpuSpec(
        name=name,
        vendor=vendor,
        model=model,
        memory_type=memory_type,
        stated_memory_gb=gb,
        memory_bytes=gb * 10**9,
        bytes_basis="stated_gb_x_1e9",
        source=source,
        aliases=aliases,
        notes=notes,
    )


#: Every GPU preset, by name.
GPUS: Final[dict[str, GpuSpec]] = {
    g.name: g
    for g in (
        _stated(
            "h100-sxm-80gb",
            "NVIDIA",
            "H100 SXM",
            "HBM3",
            80,
            "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: GPU memory 80GB)",
            ("h100", "h100-sxm", "h100-80gb", "h100 sxm5 80gb", "nvidia h100 80gb hbm3"),
            "The H100 NVL (94GB) and H100 PCIe are different parts.",
        ),
        _stated(
            "h200-141gb",
            "NVIDIA",
            "H200 SXM",
            "HBM3e",
            141,
            "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM: GPU memory 141GB)",
            ("h200", "h200-sxm", "nvidia h200"),
        ),
        _stated(
            "b200",
            "NVIDIA",
            "B200",
            "HBM3e",
            180,
            "NVIDIA DGX B200 datasheet (8x B200, 1,440GB total GPU memory = 180GB per GPU)",
            ("b200-180gb", "nvidia b200"),
            "NVIDIA's March 2024 Blackwell announcement quoted 192GB per B200; shipping "
            "DGX/HGX B200 systems state 180GB per GPU, used here.",
        ),
        _stated(
            "a100-40gb",
            "NVIDIA",
            "A100 40GB",
            "HBM2",
            40,
            "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB: GPU memory 40GB HBM2)",
            ("a100-sxm4-40gb", "a100 40gb"),
        ),
        _stated(
            "a100-80gb",
            "NVIDIA",
            "A100 80GB",
            "HBM2e",
            80,
            "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB: GPU memory 80GB HBM2e)",
            ("a100", "a100-sxm4-80gb", "a100 80gb"),
        ),
        _stated(
            "l40s",
            "NVIDIA",
            "L40S",
            "GDDR6 (ECC)",
            48,
            "NVIDIA L40S GPU datasheet (GPU memory 48GB GDDR6 with ECC)",
            ("l40s-48gb", "nvidia l40s"),
        ),
        _stated(
            "mi300x",
            "AMD",
            "Instinct MI300X",
            "HBM3",
            192,
            "AMD Instinct MI300X Accelerator data sheet (192 GB HBM3)",
            ("mi300x-192gb", "amd mi300x", "instinct mi300x"),
        ),
    )
}


class UnknownGpuError(UnknownNameError):
    """No GPU preset has this name; the message lists the closest names."""

    what = "GPU preset"
    lister = "list_gpus"


def _norm(name: str) -> str:
    return "-".join(name.strip().lower().replace("_", " ").replace("-", " ").split())


def _aliases() -> dict[str, str]:
    out: dict[str, str] = {}
    for g in GPUS.values():
        for a in (g.name, *g.aliases):
            out.setdefault(_norm(a), g.name)
    return out


_ALIASES: Final[dict[str, str]] = _aliases()


def list_gpus() -> list[str]:
    """GPU preset names."""
    return list(GPUS)


def get_gpu(name: str) -> GpuSpec:
    """The GPU preset called ``name`` (case, spaces, ``-`` and ``_`` ignored).

    Raises:
        UnknownGpuError: (a KeyError) no such preset; the message suggests the
            closest names.
    """
    if not isinstance(name, str):
        raise TypeError(f"GPU name must be a str, got {type(name).__name__}")
    key = _ALIASES.get(_norm(name))
    if key is None:
        close = difflib.get_close_matches(_norm(name), sorted(_ALIASES), n=3, cutoff=0.5)
        raise UnknownGpuError(name, list(dict.fromkeys(_ALIASES[c] for c in close)))
    return GPUS[key]
