"""One rank of the multi-GPU cache test (run by tests/test_multi_gpu.py through torchrun):
every rank compiles the same new kernel at the same moment into one shared
TILECUTE_CACHE_DIR, runs it on its own GPU next to an NCCL all-reduce, and reports."""

import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import elementwise as E  # noqa: E402
import tilecute  # noqa: E402
from tilecute import driver  # noqa: E402

rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl")
counter = os.environ["TILECUTE_TEST_BUILD_COUNTER"]
real = driver.build_entry


def counted(*args, **kwargs):
    with open(counter, "a") as f:
        f.write(f"{rank}\n")
    return real(*args, **kwargs)


driver.build_entry = counted
block = int(os.environ["TILECUTE_TEST_BLOCK"])  # a block size no earlier run used: a new kernel
dist.barrier()
kernel = tilecute.compile(E.vector_add("float16", block=block))
a = torch.randn(1 << 20, device="cuda", dtype=torch.float16)
c = torch.empty_like(a)
kernel(a, a, c)
ok = torch.equal(c, a + a)
total = torch.tensor([1.0 if ok else 0.0], device="cuda")
dist.all_reduce(total)
print(json.dumps({"rank": rank, "ok": ok, "ranks_ok": total.item(), "path": str(kernel.path)}),
      flush=True)
dist.destroy_process_group()
