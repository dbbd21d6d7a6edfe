"""A twenty-ninth set of programs in TileLang's idioms (tests/unseen_programs29.py): kernels built
on the Python side as real repositories build them -- factories with keyword-only parameters,
dtype spellings (strings, T.* objects, torch dtypes), shapes and tunables computed in Python,
trace-time loops over Python lists / tuples / zip / enumerate, comprehensions allocating
buffers, buffers in lists and dicts, macros with defaults / keywords / closures / return
values, prim_funcs built by helpers, mixed symbolic shapes, threads= tuples and lists,
T.annotate_layout from a dict comprehension, T.use_swizzle, and Triton ports on flat storage.
CPU: each builds to an sm_90a cubin and what matters is checked in the generated source.
GPU: each matches a torch reference (run: pytest -q -m gpu tests/test_unseen_programs29.py)."""

import pytest

import rounds
import unseen_programs29 as P

PROGRAMS = ["bias_act_rows", "gemm_from_config", "torch_dtype_rmsnorm", "prod_flatten_scale",
            "conditional_tiles_colsum", "stencil_python_taps", "concat_widths_zip", "multi_head_accumulators",
            "dict_buffers_layernorm", "python_loop_over_list_of_scales", "macro_defaults_and_keywords",
            "macro_closure_group_quant", "composed_rowscale", "mixed_symbolic_batched_add",
            "transpose_threads_tuple", "threads_list_rowmax", "gemm_layout_dict", "triton_softmax_flat",
            "triton_clamp_relu_flat", "triton_layernorm_view", "triton_strided_batch_transpose",
            "triton_fused_add_gelu_reshape", "gemm_epilogue_pipeline", "relu_squared_wrapped",
            "softmax_dispatch_by_width", "triton_matmul_masked_flat", "qkv_split_running_offset",
            "numpy_shape_flatten_rows", "macro_optional_out_residual",
            "vector_width_from_dtype_bytes", "triton_grouped_pid_matmul",
            "gemm_macro_zipped_loads"]


_arch = rounds.use_arch("TILECUTE_ARCH")
_body = rounds.body_of(rounds.kernel_of(P))
test_every_program_is_listed = rounds.every_kernel_is_listed(
    P, PROGRAMS, ("tilecute", "T", "torch"))
test_program_builds_a_cubin = rounds.builds_a_cubin(PROGRAMS, rounds.kernel_of(P))


# ---- what the generated source says ------------------------------------------------------
def test_factory_parameters():
    src = _body("bias_act_rows")  # relu by a Python string: T.max(v, 0) on the float32 sum
    assert "cutlass.Float16(cute.arch.fmax(v, cutlass.Float32(0.0)))" in src and "B_ptr" in src
    src = _body("bias_act_rows", with_bias=False, act="silu")  # no bias parameter at all
    assert "B_ptr" not in src and "cute.math.exp(" in src and "fmax" not in src
    src = _body("torch_dtype_rmsnorm")  # torch.bfloat16 is bfloat16; 4096 // 1024 rows a block
    assert "cute.make_rmem_tensor((8,), cutlass.BFloat16)" in src
    assert "cute.make_layout((64, 1024,), stride=(1024, 1,))" in src
    src = _body("prod_flatten_scale")  # math.prod(shape) = 12288, the 4-D tensor viewed flat
    assert "xf = cute.make_tensor(X_ptr, cute.make_layout((12288,), stride=(1,)))  # T.view of X" in src
    assert "yf[g] = xf[g] * cutlass.Float32(0.5) + cutlass.Float32(g - g // 16 * 16)" in src
    src = _body("gemm_from_config")  # the panel of 4 in column order remaps the block indices
    assert "panel_first + 4 <= 4" in src and "by_1_ =" in src
    src = _body("gemm_from_config", config="large")
    assert "(2, 1)" in src or "256" in src  # 256 threads: two warpgroups
    src = _body("softmax_dispatch_by_width")  # N=16 picks the thread-a-row builder
    assert "def tilecute_narrow_0(" in src
    assert "def tilecute_wide_0(" in _body("softmax_dispatch_by_width", N=1024)


def test_python_loops_unroll_at_trace_time():
    src = _body("stencil_python_taps")  # three taps, three masked reads, no loop
    assert "for " not in src.split("acc[0] = cutlass.Float32(0.0)", 1)[1]
    for name, w in (("src", "0.25"), ("src_1_", "0.5"), ("src_2_", "0.25")):
        assert f"acc[0] = acc[0] + cutlass.Float32({w}) * cutlass.select_({name} >= 0 and {name} < 4096" in src
    assert "src = g + -1" in src and "src_2_ = g + 1" in src
    src = _body("python_loop_over_list_of_scales")
    for s in ("1.0", "-2.0", "0.5", "3.0"):
        assert f"cute.arch.fmax(x_f[tc_lane" in src and f"* cutlass.Float32({s}), cutlass.Float32(0.0))" in src
    src = _body("python_loop_over_list_of_scales", scales=[0.0, 2.0])  # the zero scale is skipped
    assert src.count("cute.arch.fmax(") == 1 and "cutlass.Float32(2.0)" in src
    src = _body("gemm_epilogue_pipeline")  # stages applied in the tuple's order
    assert src.index("* cutlass.Float32(0.5)") < src.index("Bias.iterator") < src.index("cute.arch.fmax(acc[")
    src = _body("gemm_epilogue_pipeline", epilogue=("relu",))
    assert "Bias.iterator" not in src and "Float32(0.5)" not in src and "cute.arch.fmax(acc[" in src


def test_buffers_in_python_containers():
    src = _body("concat_widths_zip")  # one shared tile per width, named after the list
    assert "tiles_0_ = " in src and "tiles_1_ = " in src and "tiles_2_ = " in src
    assert "cute.make_layout(2048))" in src and "cute.make_layout(1024))" in src and "cute.make_layout(3072))" in src
    # each input lands at its column offset (0, 64, 96) of the 192-wide output
    assert "* 192 + 0 + j" in src and "* 192 + 64 + j_1_" in src and "* 192 + 96 + j_2_" in src
    src = _body("multi_head_accumulators")
    assert "# T.gemm(xs_0, ws_0, accs_0): accs_0 = xs_0 @ ws_0" in src
    assert "# T.gemm(xs_1, ws_1, accs_1): accs_1 = xs_1 @ ws_1" in src
    assert "tct.store(Y_desc, tc_smem + 0, (0, bx * 64)" in src and "tct.store(Y_desc, tc_smem + 0, (64, bx * 64)" in src
    src = _body("dict_buffers_layernorm")
    assert "stats_0_ = cute.make_rmem_tensor((4,), cutlass.Float32)" in src
    assert "cute.math.rsqrt(tcr.pick(stats_1_, i_2_, 4) / cutlass.Float32(512.0)" in src
    assert "* cutlass.Float32(2.0)" not in src  # affine=False: the branch is never traced
    assert "* cutlass.Float32(2.0)" in _body("dict_buffers_layernorm", affine=True)
    src = _body("gemm_layout_dict")  # the dict comprehension's layouts swizzle both tiles
    assert src.count("tcm.operand(") == 2
    assert "False, \"wgmma\")" in src and "True, \"wgmma\")" in src


def test_running_offsets_and_list_append():
    src = _body("qkv_split_running_offset")
    # one fragment a part (the loop's `frag` allocated anew each item), offsets 0, 64, 96
    assert "frag_2_ = cute.make_rmem_tensor(" in src
    assert "off = 0" in src and "off_1_ = 64" in src and "off_2_ = 96" in src
    assert "QKV[bx * 16 + i, off + (j + tc_lane2)]) * cutlass.Float32(0.125)" in src
    # written back V, K, Q: the reversed list's first part is frag_2_ at out_off = 0
    assert src.index("cutlass.Float16(frag_2_[") < src.index("cutlass.Float16(frag_1_[") < \
        src.index("cutlass.Float16(frag[")
    assert "out_off_2_ = 64" in src


def test_numpy_scalars_are_python_numbers():
    # np.prod / np.int64 dims were refused ("a dimension must be an int ..., got np.int64(24)")
    src = _body("numpy_shape_flatten_rows")
    assert "cute.make_layout((24, 128,), stride=(128, 1,))" in src
    assert "if bx * 8 + r < 24:" in src and "roundeven" not in src  # float16: the half branch


def test_macro_return_in_a_parse_time_branch():
    # `if out is None: return ...` was refused ("returns a value from inside a branch")
    src = _body("macro_optional_out_residual")
    assert "h = cutlass.Float32(0.0) + X[g] + R[g]" in src  # sum() over a generator
    assert "keep[0] = h * cutlass.Float32(1.0) + cutlass.Float32(0.0)" in src
    assert "stored = keep[0]\n    H[g] = stored" in src
    assert "keep[0] * cutlass.Float32(0.5) + cutlass.Float32(-0.25)" in src


def test_dtype_bytes_sizes_the_vector():
    # T.dtype(dtype).bytes was an AttributeError; bfloat16: 8 elements (16 bytes) a thread
    src = _body("vector_width_from_dtype_bytes")
    assert "cute.make_rmem_tensor((8,), cutlass.BFloat16)" in src and "bx * 2048" in src
    src = _body("vector_width_from_dtype_bytes", dtype="float32")
    assert "cute.make_rmem_tensor((4,), cutlass.Float32)" in src and "bx * 1024" in src


def test_macro_zipping_buffer_lists_in_a_pipeline():
    src = _body("gemm_macro_zipped_loads")
    # both loads are TMA copies into the two named, multi-buffered tiles, then one wgmma
    assert "tct.load(A_desc, tc_smem + cute.assume(0 + (tc_j0 % 2) * 4096" in src
    assert "(tc_j0 * 32, by * 64), 4096)" in src and "(bx * 64, tc_j0 * 32), 4096)" in src
    assert "# T.gemm(A_s, B_s, acc): acc += A_s @ B_s" in src


def test_macros():
    src = _body("macro_defaults_and_keywords")
    # the default kind="max" then kind="sum"; the keyword call's default scale=1.0
    assert src.index('"max"') < src.index("cute.math.exp(") < src.index('"sum"')
    src = _body("macro_closure_group_quant")  # the helper's group (32) and range (127)
    assert "sc = amax[0] / cutlass.Float32(127.0)" in src and "S[g] = sc" in src
    assert "for t in cutlass.range(0, 32):" in src and "cutlass.Float32(-127.0)" in src
    src = _body("macro_closure_group_quant", group=16, bits=4)
    assert "cutlass.Float32(7.0)" in src and "cutlass.range(0, 16)" in src


def test_symbolic_shapes_and_threads():
    src = _body("composed_rowscale")
    assert "M: cutlass.Int32" in src and "if bx * 8 + i < M:" in src
    src = _body("mixed_symbolic_batched_add")
    assert "B: cutlass.Int32, L: cutlass.Int32" in src
    assert "cute.make_layout((B, L, 128,), stride=(128 * L, 128, 1,))" in src
    src = _body("transpose_threads_tuple")
    assert "tc_tid = tc_tx + tc_ty * 32" in src and "s[(ty + r * 8) * 33 + tx]" in src
    src = _body("threads_list_rowmax")
    assert "tc_tid = tc_tx + tc_ty * 64" in src and "part[" in src


def test_triton_ports():
    src = _body("triton_softmax_flat")  # BLOCK = 1024 (next power of two of 781), masked -inf
    assert 'cutlass.select_((c + tc_lane3) < 781, tc_ld4, cutlass.Float32(float("-inf")))' in src
    assert "Y[pid * 781 + (c_2_ + tc_lane18)] = row[" in src
    src = _body("triton_clamp_relu_flat")  # tl::clamp keeps a NaN; relu is fmax(x, 0)
    assert "cute.math.isnan(cutlass.Float32(x))" in src and "cutlass.Float32(-1.5)" in src
    assert "cute.arch.fmax(cutlass.Float32(x), cutlass.Float32(0.0))" in src
    src = _body("triton_layernorm_view")
    assert "X = cute.make_tensor(Xf_ptr, cute.make_layout((64, 384,), stride=(384, 1,)))  # T.view of Xf" in src
    assert "cutlass.select_(col < 384, cutlass.Float32(tc_ld3), cutlass.Float32(0.0))" in src
    src = _body("triton_strided_batch_transpose")
    assert "Y[pb * 3840 + c * 48 + r] = X[pb * 3840 + r * 80 + c]" in src
    src = _body("triton_grouped_pid_matmul")  # Triton's group formula, num_pid_in_group 32
    assert "group_size_m = cutlass.min(6 - first_pid_m, 4)" in src
    assert "pid_n = pid % 32 // group_size_m" in src
    src = _body("triton_matmul_masked_flat")
    assert "tc_ld5 = A[rm * 72 + rk * 1]" in src and "tc_ld8 = B[rk_1_ * 136 + rn * 1]" in src
    assert "C[pid_m * 64 + i_1_, pid_n * 64 + (j_1_ + tc_lane10)] = acc[" in src


# ---- GPU: against torch --------------------------------------------------------------------
_close = rounds.close


@pytest.mark.gpu
def test_factories_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    x = torch.randn(256, 512, device=dev).half()
    b = torch.randn(512, device=dev).half()
    _close(P.bias_act_rows()(x, b), torch.relu(x.float() + b.float()), 1e-2)
    _close(P.bias_act_rows(with_bias=False, act="silu")(x), torch.nn.functional.silu(x.float()), 1e-2)

    for cfg in ("small", "large"):
        a = torch.randn(256, 256, device=dev).half()
        w = torch.randn(256, 256, device=dev).half()
        _close(P.gemm_from_config(config=cfg)(a, w), a.float() @ w.float(), 5e-1)

    x = torch.randn(64, 1024, device=dev).bfloat16()
    w = torch.rand(1024, device=dev) + 0.5
    xf = x.float()
    want = xf * torch.rsqrt((xf * xf).mean(1, keepdim=True) + 1e-6) * w
    _close(P.torch_dtype_rmsnorm()(x, w), want, 3e-2)

    x = torch.randn(4, 6, 32, 16, device=dev)
    col = torch.arange(16, device=dev, dtype=torch.float32)
    _close(P.prod_flatten_scale()(x), x * 0.5 + col, 1e-6)

    x = torch.randn(256, 1024, device=dev).half()
    _close(P.conditional_tiles_colsum()(x), x.float().sum(0), 5e-2)
    x = torch.randn(64, 512, device=dev).half()
    _close(P.conditional_tiles_colsum(M=64, N=512)(x), x.float().sum(0), 5e-2)

    for n, d in ((300, 16), (64, 1024)):
        x = torch.randn(n, d, device=dev).half() * 3
        _close(P.softmax_dispatch_by_width(M=n, N=d)(x), torch.softmax(x.float(), 1), 2e-3)


@pytest.mark.gpu
def test_trace_time_python_on_gpu():
    import torch
    torch.manual_seed(1)
    dev = "cuda"
    x = torch.randn(4096, device=dev)
    want = torch.nn.functional.conv1d(x.view(1, 1, -1), torch.tensor([[[0.25, 0.5, 0.25]]], device=dev),
                                      padding=1).view(-1)
    _close(P.stencil_python_taps()(x), want, 1e-5)

    xs = [torch.randn(128, w, device=dev).half() for w in (64, 32, 96)]
    assert torch.equal(P.concat_widths_zip()(*xs), torch.cat(xs, 1))

    x = torch.randn(128, 128, device=dev).half()
    w = torch.randn(2, 64, 64, device=dev).half() / 8
    want = torch.cat([x[:, :64].float() @ w[0].float(), x[:, 64:].float() @ w[1].float()], 1)
    _close(P.multi_head_accumulators()(x, w), want, 3e-2)

    x = torch.randn(256, 512, device=dev) * 2 + 1
    _close(P.dict_buffers_layernorm()(x), torch.nn.functional.layer_norm(x, (512,), eps=1e-5), 1e-4)
    _close(P.dict_buffers_layernorm(affine=True)(x), 2 * torch.nn.functional.layer_norm(x, (512,), eps=1e-5), 1e-4)

    x = torch.randn(2048, device=dev)
    want = sum(torch.relu(s * x) for s in (1.0, -2.0, 0.5, 3.0))
    _close(P.python_loop_over_list_of_scales()(x), want, 1e-5)

    a = torch.randn(256, 128, device=dev).half()
    b = torch.randn(128, 256, device=dev).half()
    bias = torch.randn(256, device=dev)
    want = torch.relu((a.float() @ b.float()) * 0.5 + bias)
    _close(P.gemm_epilogue_pipeline()(a, b, bias), want, 5e-2)
    _close(P.gemm_epilogue_pipeline(epilogue=("bias", "scale"), alpha=2.0)(a, b, bias),
           (a.float() @ b.float() + bias) * 2.0, 2e-1)


@pytest.mark.gpu
def test_running_offsets_on_gpu():
    import torch
    torch.manual_seed(5)
    x = torch.randn(128, 128, device="cuda").half()
    bq = torch.randn(64, device="cuda").half()
    q = x[:, :64].float() * 0.125 + bq.float()
    want = torch.cat([x[:, 96:].float(), x[:, 64:96].float(), q], 1)
    _close(P.qkv_split_running_offset()(x, bq), want, 1e-2)


@pytest.mark.gpu
def test_numpy_shapes_on_gpu():
    import torch
    x = torch.randn(4, 6, 128, device="cuda").half()
    scale = (torch.arange(24, device="cuda") % 8 + 1).float().view(24, 1)
    _close(P.numpy_shape_flatten_rows()(x.view(24, 128)), x.view(24, 128).float() * scale, 1e-2)


@pytest.mark.gpu
def test_macro_optional_out_on_gpu():
    import torch
    x = torch.randn(4096, device="cuda")
    r = torch.randn(4096, device="cuda")
    h, y = P.macro_optional_out_residual()(x, r)
    _close(h, x + r, 1e-6)
    _close(y, torch.relu((x + r) * 0.5 - 0.25), 1e-6)


@pytest.mark.gpu
def test_dtype_bytes_on_gpu():
    import torch
    x = torch.randn(1 << 16, device="cuda").bfloat16()
    assert torch.equal(P.vector_width_from_dtype_bytes()(x), x * 2)


@pytest.mark.gpu
def test_macro_zipped_loads_on_gpu():
    import torch
    a = torch.randn(256, 256, device="cuda").half()
    b = torch.randn(256, 256, device="cuda").half()
    _close(P.gemm_macro_zipped_loads()(a, b), a.float() @ b.float(), 5e-1)


@pytest.mark.gpu
def test_macros_on_gpu():
    import torch
    torch.manual_seed(2)
    dev = "cuda"
    x = torch.randn(128, 256, device=dev) * 3
    _close(P.macro_defaults_and_keywords()(x), torch.softmax(x, 1), 1e-5)

    x = torch.randn(8192, device=dev) * 4
    q, s = P.macro_closure_group_quant()(x)
    g = x.view(-1, 32)
    want_s = g.abs().amax(1).clamp_min(1e-8) / 127.0
    _close(s, want_s, 1e-6)
    want_q = torch.round(g / want_s[:, None]).clamp(-127, 127).to(torch.int8).view(-1)
    assert (q.int() - want_q.int()).abs().max().item() <= 1


@pytest.mark.gpu
def test_symbolic_shapes_and_threads_on_gpu():
    import torch
    torch.manual_seed(3)
    dev = "cuda"
    for m in (5, 64, 77):
        x = torch.randn(m, 256, device=dev).half()
        s = torch.randn(m, device=dev)
        _close(P.composed_rowscale()(x, s), x.float() * s[:, None], 1e-2)

    for bsz, seq in ((1, 50), (3, 128), (2, 200)):
        x = torch.randn(bsz, seq, 128, device=dev)
        p = torch.randn(seq, 128, device=dev)
        _close(P.mixed_symbolic_batched_add()(x, p), x + p, 0)

    x = torch.randn(256, 512, device=dev)
    assert torch.equal(P.transpose_threads_tuple()(x), x.t().contiguous())
    x = torch.randn(64, 256, device=dev)
    _close(P.threads_list_rowmax()(x), x.amax(1), 0)

    a = torch.randn(256, 256, device=dev).half()
    b = torch.randn(256, 256, device=dev).half()
    _close(P.gemm_layout_dict()(a, b), a.float() @ b.float(), 5e-1)


@pytest.mark.gpu
def test_triton_ports_on_gpu():
    import torch
    torch.manual_seed(4)
    dev = "cuda"
    x = torch.randn(100, 781, device=dev) * 3
    _close(P.triton_softmax_flat()(x.view(-1)).view(100, 781), torch.softmax(x, 1), 1e-5)

    x = (torch.randn(10000, device=dev) * 3).half()
    x[:3] = float("nan")
    y = P.triton_clamp_relu_flat()(x)
    assert bool(torch.isnan(y[:3]).all())
    xf = x.float()[3:]
    _close(y[3:], xf.clamp(-1.5, 2.0) + torch.relu(xf), 1e-2)

    x = torch.randn(64, 384, device=dev).half()
    want = torch.nn.functional.layer_norm(x.float(), (384,), eps=1e-5)
    _close(P.triton_layernorm_view()(x.view(-1)).view(64, 384), want, 1e-2)

    x = torch.randn(4, 48, 80, device=dev)
    y = P.triton_strided_batch_transpose()(x.view(-1)).view(4, 80, 48)
    assert torch.equal(y, x.transpose(1, 2))

    x = torch.randn(8, 16, 96, device=dev)
    r = torch.randn(8, 16, 96, device=dev)
    _close(P.triton_fused_add_gelu_reshape()(x, r), torch.nn.functional.gelu(x + r, approximate="tanh"), 1e-5)

    x = torch.randn(5000, device=dev)
    _close(P.relu_squared_wrapped()(x), torch.relu(x) ** 2, 1e-6)

    a = torch.randn(384, 128, device=dev).half()
    b = torch.randn(128, 512, device=dev).half()
    _close(P.triton_grouped_pid_matmul()(a, b), a.float() @ b.float(), 1e-1)

    a = torch.randn(200, 72, device=dev).half()
    b = torch.randn(72, 136, device=dev).half()
    _close(P.triton_matmul_masked_flat()(a.reshape(-1), b.reshape(-1)), a.float() @ b.float(), 5e-2)
