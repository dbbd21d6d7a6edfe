"""What a new user gets wrong, and the message that says so: a target tilecute does not
support (checked before any build, never pasted into a generated file or an option
string), ``out_idx`` out of range or not an index, the allocated output passed in, and a
launcher error's traceback, which names the entry's own launcher source."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import elementwise as E  # noqa: E402
import tilecute  # noqa: E402
from tilecute.host.host_module import render_host_module  # noqa: E402
from tilecute.runtime import cubingen  # noqa: E402
from tilecute.runtime.abi import LaunchABI, TensorArg  # noqa: E402
from tilecute.runtime.arch import SUPPORTED_ARCHS, TargetError  # noqa: E402
from tilecute.runtime.entry import import_source  # noqa: E402
from tilecute.runtime.kernel import resolve_out_idx  # noqa: E402

BAD_TARGETS = ['sm_90a"', "sm_90a\nimport os", "sm_90a --dump-dir /tmp", "sm_91", "90", 90]


def no_entries(cache_dir: Path) -> bool:
    return not cache_dir.exists() or not [p for p in cache_dir.iterdir() if not p.name.startswith(".")]


# --- the target (issue 22, item 4) ------------------------------------------------------------


@pytest.mark.parametrize("target", BAD_TARGETS, ids=repr)
def test_a_bad_target_is_an_error_before_any_build(cache_dir, target):
    with pytest.raises(TargetError) as info:
        tilecute.compile(E.vector_add("float16"), target=target)
    message = str(info.value)
    assert message.startswith(f"vector_add: target {target!r}")
    assert ", ".join(SUPPORTED_ARCHS) in message
    assert no_entries(cache_dir)


def test_cuda_prefixed_targets_are_checked_too(cache_dir):
    with pytest.raises(TargetError, match="target 'sm_9' .*from target='cuda:sm_9'"):
        tilecute.compile(E.vector_add("float16"), target="cuda:sm_9")


def test_jit_checks_its_target_when_it_decorates():
    with pytest.raises(TargetError, match="vadd: target 'sm_90a --x'"):
        @tilecute.jit(target="sm_90a --x")
        def vadd(n):
            return E.vector_add("float16")


@pytest.mark.parametrize("target", ["sm_75", {"kind": "cuda", "arch": "sm_75"},
                                    "cuda -arch=sm_70", "cuda:sm_61"])
def test_jit_refuses_an_arch_tilecute_does_not_build_when_it_compiles(target, cache_dir):
    # TileLang reads the target at compile time: a module pinning one kernel to sm_75
    # imports, and only that kernel's first call is refused (naming the arch)
    @tilecute.jit(target=target)
    def vadd(n):
        return E.vector_add("float16")

    with pytest.raises(TargetError, match=r"target 'sm_[67][015]'.* use one of sm_80"):
        vadd(128)
    assert no_entries(cache_dir)


@pytest.mark.parametrize("var", ["TILECUTE_ARCH", "CUTE_DSL_ARCH"])
def test_a_bad_arch_from_the_environment_is_an_error(monkeypatch, var):
    monkeypatch.setattr(cubingen, "gpu_arch", lambda device=0: None)
    monkeypatch.delenv("TILECUTE_ARCH", raising=False)
    monkeypatch.setenv(var, "sm_90a;rm")
    with pytest.raises(TargetError, match=rf"target 'sm_90a;rm' \(from \${var}\) is not an "
                                          "architecture tilecute supports; use one of sm_80"):
        cubingen.default_arch()


def test_build_cubin_checks_its_arch_first(tmp_path):
    with pytest.raises(TargetError, match=r"\(from build_cubin\(vector_add\)\)"):
        tilecute.build_cubin(E.vector_add("float16"), arch="sm_90a --keep-ptx", out_dir=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_compile_cubin_refuses_an_arch_before_cute_compile(tmp_path):
    with pytest.raises(TargetError):
        cubingen.compile_cubin(str(tmp_path / "kernel_cute.py"), "f", "sm_90a --dump-dir /tmp",
                               str(tmp_path))


def test_the_host_module_quotes_the_arch(tmp_path):
    """An arch no check has seen cannot break out of its string in host.py (a newline is
    refused by the checks before rendering: the header comment names the arch too)."""
    abi = LaunchABI("f", (TensorArg("A", "float16", (1024,)),), (), ())
    arch = 'sm_90a" + __import__("os").getcwd() + "'
    host = tmp_path / "host.py"
    host.write_text(render_host_module(abi, arch=arch, tilecute_version="0"))
    assert import_source(host, "tilecute_test_quoted_arch").ARCH == arch


def test_a_cubin_builds_in_a_cache_folder_whose_name_has_spaces(tmp_path, monkeypatch):
    """The dump folder reaches cute.compile's option string as one argument."""
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "my kernels --keep-ptx"))
    kernel = tilecute.compile(E.vector_add("float16", block=512), target="sm_90a")
    cubin = Path(kernel.ensure_cubin())
    assert cubin.read_bytes()[:4] == b"\x7fELF" and cubin.parent == kernel.path
    assert not list(kernel.path.glob("*.ptx"))


# --- out_idx (issue 22, item 8) ----------------------------------------------------------------


@pytest.mark.parametrize("out_idx", [[3], [-4], 3, [0, 7]])
def test_out_idx_out_of_range_is_an_error_before_any_build(cache_dir, out_idx):
    with pytest.raises(ValueError, match=r"vector_add: out_idx -?\d is out of range: vector_add "
                                         r"has 3 parameters \(A, B, C\), so an index is 0 to 2, "
                                         r"or -3 to -1 counting from the end"):
        tilecute.compile(E.vector_add("float16"), out_idx=out_idx, target="sm_90a")
    assert no_entries(cache_dir)


def test_out_idx_by_name_is_a_type_error_naming_the_index(cache_dir):
    with pytest.raises(TypeError, match=r"vector_add: out_idx takes parameter indices \(ints\), "
                                        r"got 'B' \(parameter 'B' is out_idx 1\)"):
        tilecute.compile(E.vector_add("float16"), out_idx=["B"], target="sm_90a")
    assert no_entries(cache_dir)


def test_out_idx_forms():
    params = ["A", "B", "C"]
    assert resolve_out_idx("f", params, None) == []
    assert resolve_out_idx("f", params, -1) == [2]
    assert resolve_out_idx("f", params, [-1, 0]) == [0, 2]
    assert resolve_out_idx("f", params, (1,)) == [1]
    with pytest.raises(ValueError, match=r"f: out_idx names parameter 2 \('C'\) twice"):
        resolve_out_idx("f", params, [2, -1])
    with pytest.raises(TypeError, match="f: out_idx takes parameter indices"):
        resolve_out_idx("f", params, [True])
    with pytest.raises(TypeError, match="f: out_idx takes a parameter index or a list"):
        resolve_out_idx("f", params, "C")
    with pytest.raises(ValueError, match=r"f has 1 parameter \(A\)"):
        resolve_out_idx("f", ["A"], [1])


def test_passing_the_allocated_output_names_it(cache_dir):
    kernel = tilecute.compile(E.vector_add("float16"), out_idx=[-1], target="sm_90a")
    a = torch.zeros(1024, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"vector_add: expected 2 arguments \(A, B\) and optionally "
                                        r"a stream, got 3: C \(out_idx \[2\]\) is allocated by the "
                                        "kernel and returned, so do not pass it"):
        kernel(a, a, torch.empty_like(a))
    assert kernel._func is None  # refused before the launcher was loaded


# --- the launcher's traceback (issue 22, item 8) ----------------------------------------------


def test_a_launcher_error_traceback_names_the_entrys_source(cache_dir):
    import tvm_ffi

    kernel = tilecute.compile(E.vector_add("float16"), target="sm_90a")
    function = tvm_ffi.load_module(str(kernel.path / "launcher.so"))[kernel.name]
    a = torch.zeros(1024, dtype=torch.float32)
    with pytest.raises(ValueError, match="argument 'A': expected dtype float16") as info:
        function(a, a, a)
    text = "".join(traceback.format_exception(info.value))
    assert ".tmp-" not in text
    assert str(kernel.path) in text  # the launcher source under the entry, which exists
    # the frame is the launcher's call function (the check itself ran in the launcher runtime)
    assert f'{kernel.path / "launcher.cpp"}", line ' in text and "void call_vector_add(" in text
