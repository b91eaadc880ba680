"""Where to run, and what we are running on: the device helper and the environment report of lesson 00."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

import torch


def get_device() -> torch.device:
    """The best available device: ``cuda``, then Apple's ``mps``, then ``cpu``.

    Used by every lesson, introduced in ``notebooks/00_welcome.ipynb``. Lessons create their data on the
    CPU with a fixed seed and move it here, so printed (rounded, CPU) results are the same everywhere.

    Returns:
        A ``torch.device``.

    Example:
        >>> device = get_device()  # cpu here, cuda on Colab with a GPU
        >>> (torch.ones(3, device=device) * 2).sum().item()  # tensors made there work there
        6.0
    """
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def environment_report() -> dict[str, str]:
    """Versions, device and threads, as a ``{name: value}`` dict (print it in an output-ignored cell).

    Shown in ``notebooks/00_welcome.ipynb``.

    Example:
        >>> report = environment_report()
        >>> {"python", "torch", "device", "threads"} <= set(report)
        True
    """
    device = get_device()
    report = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "attention_lib": _version("attention-lib"),
        "numpy": _version("numpy"),
        "matplotlib": _version("matplotlib"),
        "ipywidgets": _version("ipywidgets"),
        "device": str(device),
        "threads": str(torch.get_num_threads()),
        "on_colab": str("google.colab" in sys.modules),
    }
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(device)
        report["cuda"] = str(torch.version.cuda)
    return report
