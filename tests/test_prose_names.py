"""Every package name a notebook's prose quotes exists: a learner who types it gets the thing, not an
AttributeError.

The test reads every inline code span (`...`) of every markdown cell of every notebook, lessons and solutions:

- ``al.X.Y`` and ``attention_lib.X.Y``, anywhere in a span (``python -m attention_lib.bench``), must resolve in the
  package, as an attribute or a submodule;
- a span that is one name, alone or called (``generate(...)``), and that looks like code (an underscore, a capital
  inside, or a call), must be a name of the package (any module, class member or parameter), of the notebook's own
  code or its lesson's and solution's, of Python, of torch (``torch``, ``torch.nn``, ``torch.nn.functional``,
  ``torch.distributed``, ``Tensor``), or be listed below as quoted from another project or as a symbol of a formula.

A name the prose invents for an idea, not for code, is written without backticks.
"""

import builtins
import importlib
import inspect
import keyword
import pkgutil
import re

import nbformat
import pytest
from notebook_rules import ROOT, all_notebooks

import attention_lib

NOTEBOOKS = all_notebooks()
IDS = [p.relative_to(ROOT / "notebooks").as_posix() for p in NOTEBOOKS]

#: Names the notebooks quote from other projects, by project, and where they are (the one list of them).
QUOTED_ELSEWHERE = {
    "transformers": {"past_key_values": "generate's cache argument", "position_ids": "LlamaModel's forward",
                     "eos_token_id": "GenerationConfig", "eager_mask": "masking_utils.py",
                     "generate_batch": "continuous batching"},
    "PyTorch": {"check_prefer_cudnn_attention": "aten/src/ATen/native/transformers/cuda/sdp_utils.cpp",
                "priority_order": "sdp_utils.cpp", "_templated_ring_attention": "torch.distributed.tensor",
                "ATEN_CPU_CAPABILITY": "the environment variable that picks the CPU kernels",
                "set_rotate_method": "torch.distributed.tensor.experimental, context parallelism",
                "ALL_GATHER": "context parallelism's default rotate method"},
    "Triton": {"min_dot_size": "triton/backends/nvidia/compiler.py", "_attn_bwd": "the fused-attention tutorial",
               "_attn_bwd_preprocess": "the fused-attention tutorial"},
    "FlashAttention": {"scale_apply_exp2": "csrc/flash_attn/src/softmax.h",
                       "softmax_lse_ptr": "csrc/flash_attn/src/fmha.h", "flash_attn_varlen_func": "flash_attn"},
    "vLLM": {"kv_c_and_k_pe_cache": "vllm/v1/attention/backends/mla/common.py",
             "block_tables": "its paged-attention kernel", "context_lens": "its paged-attention kernel"},
    "FlashMLA": {"h_q": "its count of query heads, in its README"},
    "LLMs-from-scratch": {"current_pos": "its KV-cache chapter"},
    "glibc": {"M_MMAP_THRESHOLD": "man 3 mallopt", "M_TRIM_THRESHOLD": "man 3 mallopt"},
}
#: Symbols of the formulas the prose writes in backticks: not names of code.
SYMBOLS = {"d_model", "d_v", "d_k", "s_j", "W_uk", "W_uv", "NaN"}

SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
QUALIFIED = re.compile(r"\b(?:al|attention_lib)((?:\.\w+)+)")
ONE_NAME = re.compile(r"^([A-Za-z_]\w*)(\(.*\))?$")


def spans(nb) -> list[str]:
    """The inline code spans of a notebook's markdown cells (fenced blocks left out)."""
    found = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found += SPAN.findall(re.sub(r"```.*?```", "", cell.source, flags=re.S))
    return found


def resolves(dotted: str) -> bool:
    """Whether ``attention_lib`` + ``dotted`` (".widgets.masking_explorer") is an attribute or module."""
    obj, path = attention_lib, "attention_lib"
    for part in dotted.strip(".").split("."):
        path += "." + part
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(path)
        except ModuleNotFoundError:
            return False
    return True


def _parameters(obj) -> set[str]:
    try:
        return set(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        return set()


def _names_of(namespace: dict) -> set[str]:
    names = set(namespace)
    for obj in namespace.values():
        if callable(obj):
            names |= _parameters(obj)
        if inspect.isclass(obj):
            for member in vars(obj).values():
                names |= _parameters(member) if callable(member) else set()
            names |= set(vars(obj))
    return names


def package_names() -> set[str]:
    """Every name the package defines: modules, their names, class members, parameters. ``__main__`` modules
    (which train or benchmark when imported) are left out."""
    names = set()
    for info in pkgutil.walk_packages(attention_lib.__path__, "attention_lib."):
        if info.name.endswith("__main__"):
            continue
        names.add(info.name.rsplit(".", 1)[1])
        names |= _names_of(vars(importlib.import_module(info.name)))
    return names


def torch_names() -> set[str]:
    import torch
    import torch.distributed
    import torch.nn.functional as F

    names = set(dir(torch)) | set(dir(torch.nn)) | set(dir(F)) | set(dir(torch.Tensor)) | set(dir(torch.distributed))
    for function in (F.scaled_dot_product_attention, torch.nn.MultiheadAttention.__init__,
                     torch.nn.MultiheadAttention.forward):
        names |= _parameters(function)
    return names


@pytest.fixture(scope="module")
def known() -> set[str]:
    quoted = {name for names in QUOTED_ELSEWHERE.values() for name in names}
    return package_names() | torch_names() | set(dir(builtins)) | set(keyword.kwlist) | quoted | SYMBOLS


def code_names(path) -> set[str]:
    """The names in the code of a notebook, of its lesson and of its solution."""
    number = path.name[:2]
    folder = ROOT / "notebooks"
    pair = [*folder.glob(f"{number}_*.ipynb"), *(folder / "solutions").glob(f"{number}_*.ipynb")]
    names = set()
    for notebook in {path, *pair}:
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type == "code":
                names |= set(re.findall(r"[A-Za-z_]\w*", cell.source))
    return names


def unknown_names(nb, known: set[str], own: set[str]) -> list[str]:
    """The spans of ``nb`` that name something that does not exist."""
    bad = []
    for span in spans(nb):
        bad += [match.group(0) for match in QUALIFIED.finditer(span) if not resolves(match.group(1))]
        one = ONE_NAME.match(span.strip())
        if one and (one.group(2) or "_" in one.group(1).strip("_") or re.search(r"[a-z][A-Z]", one.group(1))):
            if one.group(1) not in known | own:
                bad.append(span)
    return sorted(set(bad))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_name_in_the_prose_exists(path, known):
    bad = unknown_names(nbformat.read(path, as_version=4), known, code_names(path))
    assert bad == [], (f"{path.name} names what attention_lib does not have: {', '.join(bad)}; rename it, or, if it "
                       "is quoted from another project, list it in QUOTED_ELSEWHERE of tests/test_prose_names.py")


def test_the_check_finds_a_missing_name(known):
    """Names that once existed and were renamed are found, in every form; the names that exist pass."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "Try `trained_explorer(\"reversal\")`, `render_trained`, `al.no_such_thing`, "
        "`python -m attention_lib.training.attraction`; `al.calculate_attention`, "
        "`attention_lib.widgets.masking_explorer`, `generate(...)`, `torch.nn.functional`, `my_answer`, "
        "`past_key_values`, `d_k`, a span of prose `like this`.\n\n```python\nnot_checked_in_a_block()\n```")])
    assert unknown_names(nb, known, own={"my_answer"}) == [
        "al.no_such_thing", "attention_lib.training.attraction", "render_trained", 'trained_explorer("reversal")']
