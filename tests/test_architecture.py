"""The module graph follows the pipeline: no import circles, and no module imports one
of a later stage (read from each file's ``ast``, imports inside functions included).

Stages, earliest first: the leaves every stage reads (runtime, target, options), the
IR, the frontend, the analyses and the passes in pipeline order, the launch ABI and
the pipeline list, the code generator, the host generators, the toolchain, the compile
driver, the cache, and the user-facing entry points."""

import ast
from pathlib import Path

import pytest

from tilecute.transform.pipeline import PASSES

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"tilecute": ROOT / "backend", "tilecute.runtime": ROOT / "runtime",
            "tilecute.templates": ROOT / "templates"}

# pass name in transform.pipeline -> the module that holds it
PASS_MODULES = {
    "scope_safe_values": "tilecute.transform.scope_safe_values",
    "hoist_parallel_locals": "tilecute.transform.hoist_parallel_locals",
    "choose_index_width": "tilecute.transform.index_width",
    "select_mma": "tilecute.transform.select_mma",
    "rasterize": "tilecute.transform.rasterize",
    "stage_epilogue": "tilecute.transform.shared_epilogue",
    "lower_copies_to_tma": "tilecute.transform.tma_copies",
    "warp_specialize": "tilecute.transform.warp_specialize",
    "pipeline_tma_loads": "tilecute.transform.software_pipeline",
    "assign_tma_descriptors": "tilecute.transform.tma_descriptors",
    "lower_tile_ops": "tilecute.transform.lower_tile_ops",
    "fragment_loop_bounds": "tilecute.transform.fragment_loop_bounds",
    "infer_layouts": "tilecute.transform.layout_inference",
    "vectorize": "tilecute.transform.vectorize",
    "insert_barriers": "tilecute.transform.insert_barriers",
    "split_roles": "tilecute.transform.warp_specialize",
    "assign_shared_memory": "tilecute.transform.shared_memory",
}


def modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            if rel.parts[0] in ("runtime", "templates") and pkg == "tilecute":
                continue  # installed packages of their own
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([pkg, *parts])] = path
    return out


MODULES = modules()


def imports_of(name: str, top_level_only: bool = False) -> set[str]:
    """The tilecute modules ``name`` imports (with ``top_level_only``, only those it
    imports when it is imported, not inside functions)."""
    path = MODULES[name]
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                prefix = ".".join(base[:len(base) - node.level + 1])
                mod = f"{prefix}.{node.module}" if node.module else prefix
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" for a in node.names] + [mod]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name and t.startswith("tilecute"):
                found.add(t)
    return found


GRAPH = {m: imports_of(m) for m in MODULES}
AT_IMPORT = {m: imports_of(m, top_level_only=True) for m in MODULES}


def stage(name: str) -> float:
    """Where a module stands in the pipeline (imports may only go to lower or equal)."""
    order = [p.name for p in PASSES]
    for i, p in enumerate(order):
        if PASS_MODULES.get(p) == name and p != "split_roles":
            return 3 + i / 100
    if name == "tilecute.transform.mbarriers":  # shared by the TMA scheduling passes
        return stage(PASS_MODULES["lower_copies_to_tma"]) + 0.001
    fixed = [
        # the package root only holds __version__ and lazy names (importlib, not imports)
        (("tilecute.runtime", "tilecute.target", "tilecute.options", "tilecute.templates"), 0),
        (("tilecute.ir",), 1),
        (("tilecute.language", "tilecute.layout"), 2),  # tilecute.layout: tilelang.layout's names
        (("tilecute.tvm",), 2),  # TVM's tirx expression builders over the frontend's IR
        (("tilecute.cuda", "tilecute.tileop"), 2),  # tilelang.cuda.intrinsics', tileop's names
        (("tilecute.transform.analysis",), 2.5),
        (("tilecute.transform.launch_abi",), 3.9),
        (("tilecute.transform.pipeline", "tilecute.transform"), 3.95),
        (("tilecute.codegen",), 4),
        (("tilecute.host",), 5),
        (("tilecute.toolchain",), 6),
        (("tilecute.driver",), 7),
        (("tilecute.cache",), 8),
        (("tilecute.api", "tilecute.torch", "tilecute.cli", "tilecute.__main__",
          "tilecute.autotuner", "tilecute.variants", "tilecute.export"), 9),
        # the tuner's build processes; TileLang's tilelang.jit package over tilecute.api
        (("tilecute.buildproc", "tilecute.jit"), 9),
        # TileLang's host modules under tilecute's names (docs/host-api.md)
        (("tilecute.contrib", "tilecute.engine", "tilecute.env", "tilecute.carver"), 9),
        (("tilecute.profiler", "tilecute.utils", "tilecute.testing"), 0),  # runtime re-exports
        (("tilecute",), 0),
    ]
    best = None
    for prefixes, s in fixed:
        for p in prefixes:
            if name == p or name.startswith(p + "."):
                if best is None or len(p) > best[0]:
                    best = (len(p), s)
    assert best is not None, f"{name} has no stage; add it to test_architecture.stage"
    return best[1]


def test_every_module_has_a_stage():
    for m in MODULES:
        stage(m)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_run_from_later_stages_to_earlier_ones(name):
    later = sorted(t for t in GRAPH[name] if stage(t) > stage(name))
    assert not later, f"{name} (stage {stage(name)}) imports later stages: " + \
        ", ".join(f"{t} ({stage(t)})" for t in later)


def test_the_runtime_imports_nothing_of_the_compiler():
    for m in MODULES:
        if m.startswith("tilecute.runtime"):
            assert all(t.startswith("tilecute.runtime") for t in GRAPH[m]), (m, GRAPH[m])


def test_no_import_circles():
    """Among the imports a module runs when imported (a method importing a sibling on
    call, such as ``PrimFunc.script()`` the printer, is not a circle); a package's
    ``__init__`` re-exporting its modules is not one either."""
    def edges(m):
        return {t for t in AT_IMPORT[m] if not m.startswith(t + ".")}

    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for t in edges(m):
            if state.get(t) == 1:
                raise AssertionError("import circle: " + " -> ".join(path[path.index(t):] + [t]))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)
