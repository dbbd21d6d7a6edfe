"""More of TileLang's JITKernel host API under tilecute (docs/host-api.md): the source
properties and printers (``kernel_source``, ``host_source``, ``show_source``,
``export_sources``, ``print_source_code``) and the resource-usage attributes, which
TileLang fills for HIP kernels only (``{}`` / None for CUDA).  CPU only: the kernel is
compiled, never launched."""

import pytest

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


@T.prim_func
def scale(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 2.0


@pytest.fixture(scope="module")
def kernel():
    return tilecute.compile(scale, out_idx=[1], target="sm_90a")


def test_source_properties_are_the_getters(kernel):
    assert kernel.kernel_source == kernel.get_kernel_source() == kernel.get_source("cute")
    assert "@cute.kernel" in kernel.kernel_source
    assert kernel.host_source == kernel.get_host_source()
    assert kernel.get_source("launcher") in kernel.host_source


def test_show_source_prints_what_tilelang_prints(kernel, capsys):
    kernel.show_source()
    assert capsys.readouterr().out == kernel.kernel_source + "\n"
    kernel.show_source("host")
    assert capsys.readouterr().out == kernel.host_source + "\n"
    kernel.show_source("both")
    out = capsys.readouterr().out
    assert out == ("===== Kernel Source =====\n" + kernel.kernel_source + "\n"
                   "===== Host Source =====\n" + kernel.host_source + "\n")
    with pytest.raises(ValueError, match="which is 'kernel', 'host' or 'both', got 'ptx'"):
        kernel.show_source("ptx")
    kernel.print_source_code("host")
    assert capsys.readouterr().out == kernel.host_source + "\n"


def test_export_sources_writes_the_files(kernel, tmp_path):
    kpath, hpath = tmp_path / "a" / "kernel.py", tmp_path / "b" / "host.cc"
    kernel.export_sources(kernel_path=str(kpath), host_path=str(hpath))
    assert kpath.read_text() == kernel.kernel_source
    assert hpath.read_text() == kernel.host_source
    only = tmp_path / "only.py"
    kernel.print_source_code(file=str(only))  # TileLang's old spelling: the kernel source
    assert only.read_text() == kernel.kernel_source
    with pytest.raises(ValueError, match="give kernel_path, host_path or both"):
        kernel.export_sources()


def test_resource_usage_is_tilelangs_cuda_answer(kernel):
    assert kernel.resource_usage == {}
    assert kernel.n_regs is None and kernel.n_spills is None and kernel.n_max_threads is None


# ---- TVM names tilecute refuses, met the ways TileLang's tests meet them --------------------------
def test_isinstance_against_a_refused_tvm_class_names_it():
    from tilecute.tvm import tirx

    with pytest.raises(NotImplementedError, match="tvm.tirx.Call is not supported by tilecute"):
        isinstance(1, tirx.Call)
    with pytest.raises(NotImplementedError, match="tvm.tirx.IntImm is not supported by tilecute"):
        issubclass(int, tirx.IntImm)


def test_a_refused_tvm_call_as_a_statement_names_it_at_its_line():
    from tilecute.language import FrontendError
    from tilecute.tvm import tirx

    text = (
        "@T.prim_func\n"
        "def k(A: T.Tensor((1,), \"int32\")):\n"
        "    with T.Kernel(1, threads=32):\n"
        "        tx = T.get_thread_binding()\n"
        "        if tx == 0:\n"
        "            tirx.call_extern(\"void\", \"__nanosleep\", 100)\n"
        "            A[0] = -1\n")
    with pytest.raises(FrontendError) as e:
        T.from_script(text, {"tirx": tirx})
    assert "<script>:6:" in str(e.value)
    assert "tvm.tirx.call_extern is not supported by tilecute: it is TVM's" in str(e.value)
