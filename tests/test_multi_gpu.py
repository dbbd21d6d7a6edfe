"""One kernel on every GPU of a host (pytest -m gpu on a machine with 2+ GPUs)."""

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import elementwise as E  # noqa: E402
import tilecute  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                                 reason="needs 2 GPUs")]


@pytest.fixture(scope="module")
def vadd():
    kernel = tilecute.compile(E.vector_add("float16"))
    kernel.ensure_cubin()  # the lazy cubin build (seconds on a cold cache) happens here
    return kernel


def _inputs(device, n=1 << 20):
    a = torch.randn(n, device=device, dtype=torch.float16)
    return a, torch.randn_like(a), torch.empty_like(a)


def test_two_threads_two_gpus_tight_loop(vadd):
    """Launches counted in a 3 s window that starts after each device's first call (the
    cubin is built by the fixture; the first call on a device loads the module there)."""
    errors, counts = [], [0, 0]

    def worker(dev):
        try:
            torch.cuda.set_device(dev)
            a, b, c = _inputs(f"cuda:{dev}")
            ref = a + b
            vadd(a, b, c)
            torch.cuda.synchronize(dev)
            end = time.time() + 3.0
            while time.time() < end:
                for _ in range(100):
                    vadd(a, b, c)
                counts[dev] += 100
                torch.cuda.synchronize(dev)
                if not torch.equal(c, ref):
                    errors.append(f"wrong result on cuda:{dev}")
                    return
                c.fill_(float("nan"))
        except Exception as e:  # noqa: BLE001 - report from the thread
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert min(counts) > 1000, counts


def test_first_call_on_gpu1_after_10k_calls_on_gpu0(vadd):
    k = tilecute.compile(E.vector_add("float16", block=2048))  # fresh slots
    a0, b0, c0 = _inputs("cuda:0", 4096)
    for _ in range(10_000):
        k(a0, b0, c0)
    torch.cuda.synchronize(0)
    assert torch.equal(c0, a0 + b0)
    torch.cuda.set_device(0)
    a1, b1, c1 = _inputs("cuda:1", 100_003)
    k(a1, b1, c1)  # current device is 0: the kernel runs on the tensors' device
    torch.cuda.synchronize(1)
    assert torch.equal(c1, a1 + b1)
    assert torch.cuda.current_device() == 0


def test_the_streams_are_the_tensors_devices(vadd):
    """The call path passes torch's current stream of the tensors' device (cuda:1 here,
    with cuda:0 current): the launch is ordered behind work queued on that stream."""
    vadd(*_inputs("cuda:0", 1024))
    assert vadd._call is not vadd._func  # (the call path in use)
    torch.cuda.set_device(0)
    s1 = torch.cuda.Stream(device=1)
    big = torch.randn(8192, 8192, device="cuda:1")
    a, b, c = _inputs("cuda:1")
    with torch.cuda.stream(s1):  # (current stream of device 1)
        big @ big
        a2 = a * 1  # written on s1, read by the kernel on s1
        vadd(a2, b, c)
        got = c.clone()
    s1.synchronize()
    assert torch.cuda.current_device() == 0
    assert torch.equal(got, a + b)


def test_tensors_on_two_devices_are_a_value_error(vadd):
    a0, b0, c0 = _inputs("cuda:0", 1024)
    a1 = a0.to("cuda:1")
    with pytest.raises(ValueError, match="cuda:1|device"):
        vadd(a0, a1, c0)


def test_cleanup_then_relaunch_on_both_devices(vadd):
    for dev in (0, 1):
        a, b, c = _inputs(f"cuda:{dev}", 5000)
        vadd(a, b, c)
    torch.cuda.synchronize()
    vadd.launcher["cleanup"]()
    vadd.launcher["cleanup"]()  # twice is fine
    for dev in (0, 1):
        a, b, c = _inputs(f"cuda:{dev}", 5000)
        vadd(a, b, c)
        torch.cuda.synchronize(dev)
        assert torch.equal(c, a + b)


def test_two_ranks_compile_one_new_kernel_once(tmp_path):
    counter = tmp_path / "builds.txt"
    env = {**os.environ, "TILECUTE_CACHE_DIR": str(tmp_path / "cache"),
           "TILECUTE_TEST_BUILD_COUNTER": str(counter),
           "TILECUTE_TEST_BLOCK": str(random.choice([256, 512, 1024, 2048, 4096]) * 3)}
    worker = Path(__file__).with_name("dist_worker.py")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                          "--master_port", str(random.randint(20000, 40000)), str(worker)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in rows) == [0, 1]
    assert all(r["ok"] and r["ranks_ok"] == 2.0 for r in rows)
    assert len({r["path"] for r in rows}) == 1
    assert counter.read_text().split() in (["0"], ["1"])  # exactly one build
