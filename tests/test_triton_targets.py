"""Lesson 14's kernel compiled for real GPUs without one: every launch the course makes, for sm75, sm80 and sm90.

In a fresh process (this suite's other tests run kernels in Triton's interpreter, and Triton keeps what it compiled
in a cache): ``python -m attention_lib.memory_efficient.triton_targets --json`` compiles each launch down to a
binary with Triton's own NVIDIA compiler and ``ptxas``, and reports its shared memory, registers, spills and the
instruction its ``tl.dot`` became: 57 binaries, about 75 s of compiling shared between the cores (40-45 s on a quiet
2-core machine, 3-4 min on a busy one), hence ``slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="triton is not installed (Linux only)")
pytestmark = pytest.mark.slow

from attention_lib.memory_efficient.triton_targets import GPU_CHECK_CASES, TARGETS, course_launches  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton_cache"))  # compiled here, not found in a cache
    result = subprocess.run([sys.executable, "-m", "attention_lib.memory_efficient.triton_targets", "--json"],
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=900, check=False)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    return json.loads(result.stdout)


def test_every_launch_is_compiled_for_every_target(rows):
    launches = course_launches()
    assert len(rows) == len(TARGETS) * len(launches)
    assert {row["capability"] for row in rows} == {75, 80, 90}
    compiled = {(row["dtype"], row["L"], row["S"], row["E"], row["is_causal"]) for row in rows if row["where"] ==
                "gpu-check"}
    assert compiled == {(dtype, L, S, E, causal) for dtype in ("float32", "float16", "bfloat16")
                        for (L, S, E), causal in GPU_CHECK_CASES}  # gpu-check's own cases, in every dtype
    assert {row["where"] for row in rows} >= {"gpu-check", "lesson 14", "tests"}


def test_every_binary_fits_the_shared_memory_of_its_target(rows):
    too_big = [row for row in rows if row["shared_kib"] > row["limit_kib"]]
    assert not too_big
    assert {row["capability"]: row["limit_kib"] for row in rows} == {75: 64, 80: 99, 90: 227}


def test_tensor_cores_only_for_16_bit_inputs_from_sm80_on(rows):
    """What the lesson says: on a T4 every tl.dot is fma, fp16 included; float32 is fma everywhere (IEEE, not TF32);
    float16 and bfloat16 use the tensor cores from the A100 on (wgmma on the H100 when the tile allows)."""
    for row in rows:
        tensor_cores = row["capability"] >= 80 and row["dtype"] != "float32"
        assert row["instruction"].startswith("mma") == tensor_cores, row
    assert any(row["instruction"] == "mma (wgmma)" for row in rows if row["capability"] == 90)


def test_the_launchers_choices_spill_no_registers(rows):
    spilled = [row for row in rows if row["spill_bytes"]]
    assert not spilled
