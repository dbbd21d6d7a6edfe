"""``T.im2col`` whose ``block_K`` columns lie in one filter tap (``C`` a multiple of
``block_K``) is lowered as a copy: each row reads ``block_K`` consecutive channels of one
image pixel, so it moves 16 bytes at a time by cp.async in the ``T.Pipelined`` loop's
stages (TileLang's convolution example ran at 0.57x TileLang's time with one scalar load
an element and no pipelining).  Other channel counts keep the element-wise gather.
Programs written for these tests in TileLang's idioms."""

import pytest
import torch

import tilecute
import tilecute.language as T


def conv_nhwc(n=2, c=64, h=20, w=18, f=64, k=3, s=1, d=1, p=1, bm=64, bn=64, bk=32,
              stages=3, extra_steps=0):
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s + 1

    @T.prim_func
    def conv(X: T.Tensor((n, h, w, c), "float16"), Wt: T.Tensor((k * k * c + extra_steps * bk, f), "float16"),
             Y: T.Tensor((n * oh * ow, f), "float16")):
        with T.Kernel(T.ceildiv(f, bn), T.ceildiv(n * oh * ow, bm), threads=128) as (bx, by):
            x_s = T.alloc_shared((bm, bk), "float16")
            w_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k * k * c, bk) + extra_steps, num_stages=stages):
                T.im2col(X, x_s, by, ko, k, s, d, p)
                T.copy(Wt[ko * bk, bx * bn], w_s)
                T.gemm(x_s, w_s, acc)
            T.copy(acc, Y[by * bm, bx * bn])

    return conv, (n, oh, ow)


def _reference(x, wt, k, s, d, p):
    c, f = x.shape[-1], wt.shape[-1]
    wk = wt.float().view(k, k, c, f).permute(3, 2, 0, 1)
    y = torch.nn.functional.conv2d(x.float().permute(0, 3, 1, 2), wk, stride=s, padding=p, dilation=d)
    return y.permute(0, 2, 3, 1).reshape(-1, f)


def test_one_tap_tiles_copy_by_cp_async():
    src = tilecute.compile(conv_nhwc()[0]).get_kernel_source()
    assert "tcc.copy_async(cute.make_tensor(X.iterator" in src
    # the image tile is one of the loop's stages, refilled two steps ahead
    assert "tc_x_s_stage" in src


def test_taps_split_by_a_tile_keep_the_gather():
    # 48 channels: a 32-wide column tile straddles two taps
    src = tilecute.compile(conv_nhwc(c=48)[0]).get_kernel_source()
    assert "copy_async(cute.make_tensor(X.iterator" not in src
    assert "im2col_k" in src


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [
    {},
    {"s": 2, "p": 1},
    {"d": 2, "p": 2, "k": 3},
    {"c": 128, "bk": 64, "k": 1, "p": 0},
    {"c": 48},  # the gather
    {"extra_steps": 1},  # a column tile past the last tap reads zeros
])
def test_conv_gpu(kw):
    torch.manual_seed(0)
    prog, (n, oh, ow) = conv_nhwc(**kw)
    args = dict(n=2, c=64, h=20, w=18, f=64, k=3, s=1, d=1, p=1, bk=32) | kw
    x = torch.randn(args["n"], args["h"], args["w"], args["c"], device="cuda").half()
    taps = args["k"] ** 2 * args["c"]
    # rows past the taps (extra_steps) are not zero: the image tile there must be
    wt = torch.randn(taps + args.get("extra_steps", 0) * args["bk"], args["f"], device="cuda").half() / 8
    y = torch.empty(n * oh * ow, args["f"], device="cuda", dtype=torch.float16)
    tilecute.compile(prog)(x, wt, y)
    ref = _reference(x, wt[:taps], args["k"], args["s"], args["d"], args["p"])
    torch.testing.assert_close(y.float(), ref, atol=5e-2, rtol=1e-2)
