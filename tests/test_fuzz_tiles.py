"""The tile fuzzer (tests/fuzz_tiles.py): random TileLang programs from seeds, each with a torch
reference.  CPU: the generator is deterministic, and a fixed set of seeds (two programs of each
form, ~20) each builds an sm_90a cubin or is refused by one of tilecute's named errors (never
a crash); a few generated sources are checked for what they mean.  GPU (``-m gpu``): the same
seeds run against their references.  More seeds: ``python tests/fuzz_run.py`` (see there)."""

import pytest

import fuzz_tiles as F

# two seeds of each form (seed % 9 picks the form), spread over the generator's corners
SEEDS = [0, 9, 1, 10, 2, 11, 3, 12, 4, 13, 5, 14, 6, 15, 7, 16, 8, 17, 27, 29]


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def test_generator_is_deterministic_and_covers_every_form():
    a, b = F.programs(0, 27), F.programs(0, 27)
    assert [p.source for p in a] == [p.source for p in b]
    assert [p.args for p in a] == [p.args for p in b]
    assert {p.form for p in a} == set(F.FORMS)
    x, y = a[5].make_inputs("cpu"), b[5].make_inputs("cpu")
    assert all((u == v).all() for u, v in zip(x, y))


def test_references_of_the_index_form_floor_negatives():
    # the reference divides as TVM's floordiv / floormod: -7 // 2 == -4, -7 % 2 == 1,
    # 7 // -2 == -4, 7 % -2 == -1, truncdiv(-7, 2) == -3, truncmod(-7, 2) == -1
    import torch
    a = torch.tensor([-7, 7, -7])
    assert F._floordiv(a, 2).tolist() == [-4, 3, -4]
    assert F._floordiv(a, -2).tolist() == [3, -4, 3]
    assert (a - F._floordiv(a, -2) * -2).tolist() == [-1, -1, -1]
    assert torch.fmod(a, 2).tolist() == [-1, 1, -1]


@pytest.mark.parametrize("seed", SEEDS)
def test_program_builds_or_is_refused_by_name(seed):
    prog = F.generate(seed)
    status, detail = F.build_program(prog)
    assert status in ("ok", "refused"), f"{prog.name}: {detail}\n{prog.source}"
    if status == "refused":
        assert "line" in detail or "main" in detail or prog.name in detail, detail


@pytest.mark.gpu
@pytest.mark.parametrize("seed", SEEDS)
def test_gpu_program_matches_its_reference(seed):
    prog = F.generate(seed)
    status, detail = F.run_program(prog, "cuda")
    assert status in ("ok", "refused"), f"{prog.name} {prog.args}: {status} {detail}\n{prog.source}"
