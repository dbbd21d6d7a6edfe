"""The generated sources of every example are pinned by a digest: a refactor of the
passes, the code generator or the templates must leave them byte-identical unless the
change is intended.  An intended change regenerates the digests with

    TILECUTE_UPDATE_DIGESTS=1 python3 -m pytest -q tests/test_generated_digest.py

and names the change in its commit message."""

import hashlib
import json
import os
from pathlib import Path

import pytest

import elementwise
import gemm
import tile_ops
import tma_ops
from tilecute import __version__
from tilecute.codegen.cute import emit_cute
from tilecute.host.host_module import render_host_module
from tilecute.host.launcher import render_launcher
from tilecute.ir.printer import print_func
from tilecute.transform.pipeline import lower

DIGESTS = Path(__file__).parent / "golden" / "generated_digests.json"
ROOT = str(Path(__file__).resolve().parents[1])  # source locations are printed; pin them relative


def _programs():
    progs = {}
    for mod in (elementwise, tile_ops, tma_ops):
        for name, fac in mod.ALL.items():
            progs[f"{mod.__name__}.{name}"] = (fac, {})
    progs["elementwise.math_ops-float16"] = (elementwise.math_ops, {"dtype": "float16"})
    progs["elementwise.math_ops-bfloat16"] = (elementwise.math_ops, {"dtype": "bfloat16"})
    progs["tma_ops.pipelined_copy-splits2"] = (tma_ops.pipelined_copy, {"splits": 2})
    gemms = {
        "matmul": {},
        "matmul-tn": {"transpose_A": True, "transpose_B": True},
        "matmul-ws": {"tn": 256, "panel": 16, "epilogue": "shared", "warp_specialize": True},
        "matmul-default-ws": {"tn": 256, "epilogue": "shared"},
        "matmul-bf16-nt": {"dtype": "bfloat16", "transpose_B": True},
        "matmul-fp8": {"dtype": "float8_e4m3", "tk": 128, "transpose_B": True},
        "matmul-tf32": {"dtype": "float32", "tk": 32, "transpose_B": True, "stages": 2},
    }
    for name, kw in gemms.items():
        progs[f"gemm.{name}"] = (gemm.matmul, kw)
    progs["gemm.matmul_bias_relu"] = (gemm.matmul_bias_relu, {})
    progs["gemm.matmul_a_registers"] = (gemm.matmul_a_registers, {})
    progs["gemm.matmul_a_registers-ws"] = (gemm.matmul_a_registers, {"tn": 256, "warp_specialize": True})
    progs["gemm.matmul_chain"] = (gemm.matmul_chain, {})
    return progs


PROGRAMS = _programs()
CONFIGS = [("sm_90a", None), ("sm_80", None),
           ("sm_90a", {"disable_tma": True, "disable_wgmma": True})]


def _sha(text: str) -> str:
    return hashlib.sha256(text.replace(ROOT, "<root>").encode()).hexdigest()[:16]


def generated(name: str, arch: str, options) -> dict:
    fac, kw = PROGRAMS[name]
    try:
        plan = lower(fac(**kw), arch, options)
    except Exception as e:  # a refusal is part of the pinned behaviour
        return {"error": f"{type(e).__name__}: {e}".replace(ROOT, "<root>")}
    try:
        cute = _sha(emit_cute(plan))
    except Exception as e:
        cute = f"{type(e).__name__}: {e}".replace(ROOT, "<root>")
    return {
        "ir": _sha(print_func(plan.func)),
        "abi": _sha(plan.abi.to_json()),
        "cute": cute,
        "launcher": _sha(render_launcher(plan.abi, tilecute_version=__version__)),
        "host": _sha(render_host_module(plan.abi, arch=arch, tilecute_version=__version__)),
    }


def _key(name, arch, options):
    return f"{name}@{arch}" + ("+" + ",".join(sorted(options)) if options else "")


def all_digests() -> dict:
    return {_key(n, a, o): generated(n, a, o) for n in PROGRAMS for a, o in CONFIGS}


@pytest.fixture(scope="module")
def pinned():
    if os.environ.get("TILECUTE_UPDATE_DIGESTS"):
        DIGESTS.write_text(json.dumps(all_digests(), indent=1, sort_keys=True) + "\n")
    return json.loads(DIGESTS.read_text())


@pytest.mark.parametrize("arch,options", CONFIGS, ids=["sm_90a", "sm_80", "sm_90a-no-tma-wgmma"])
def test_generated_sources_unchanged(pinned, arch, options):
    changed = {}
    for name in PROGRAMS:
        key = _key(name, arch, options)
        got = generated(name, arch, options)
        if pinned.get(key) != got:
            changed[key] = {"pinned": pinned.get(key), "now": got}
    assert not changed, json.dumps(changed, indent=1)
