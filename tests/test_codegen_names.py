"""Strings and names from the program cannot break the generated CuTe DSL module (issue
22, items 4 and 6).

A file name reaches the module only inside a comment that cannot end early, and never on
the two lines where Python reads an encoding declaration.  IR names that Python, CuTe
DSL's preprocessor or the generator itself also use are respelled; the few the generator
cannot respell are refused with an error naming the function and the name.
"""

import ast
import builtins

import pytest

import tilecute
from tilecute.codegen.cute import CodegenError, emit_cute
from tilecute.codegen.source import MODULE_NAMES, clashes, comment, ident, quote
from tilecute.ir.validate import ValidationError
from tilecute.language import from_script
from tilecute.transform.pipeline import lower

PROGRAM = '''
N = T.symbolic("N")

@T.prim_func
def f(A: T.Tensor((N,), "int32"), C: T.Tensor((N,), "int32"), scale: T.int32):
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            C[bx * 128 + i] = T.abs(A[bx * 128 + i]) * scale
'''


def _module_ast(source: str) -> str:
    return ast.dump(ast.parse(source))


# ---- strings ---------------------------------------------------------------------------
@pytest.mark.parametrize("filename", [
    "x.py\nopen('{marker}', 'w').close()\n#",
    "x.py\ropen('{marker}', 'w').close()\r#",
    "x.py\u2028open('{marker}', 'w').close()",
    # no line break, but an encoding declaration on the module's first line would make
    # Python decode the file with raw_unicode_escape, where \u000a is one
    "x coding:raw_unicode_escape \\u000aopen('{marker}', 'w').close()#.py",
])
def test_a_file_name_holding_code_stays_a_comment(filename, tmp_path):
    marker = tmp_path / "ran"
    name = filename.format(marker=marker)
    benign = emit_cute(lower(from_script(PROGRAM, filename="x.py")))
    evil = emit_cute(lower(from_script(PROGRAM, filename=name)))
    assert evil != benign  # the name is there, in a comment
    assert _module_ast(evil) == _module_ast(benign)  # and only in a comment
    assert "coding" not in "".join(evil.splitlines(keepends=True)[:2])
    # the cubin step imports the module from its file, as Python reads files
    info = tilecute.build_cubin(from_script(PROGRAM, filename=name), "sm_90a", out_dir=str(tmp_path / "b"))
    assert info.path and not marker.exists()


def test_quote_and_comment_keep_any_string_in_its_place():
    for text in ["wgmma", 'a"b', "a'b", "a'\"b", "x\ny", "\\", "\x00\u2028\x85é", "coding:utf-7"]:
        assert ast.literal_eval(quote(text)) == text
        line = f"x = 1  # {comment(text)}\n"
        assert len(line.splitlines()) == 1 and all(" " <= c <= "~" for c in line[:-1])
        assert _module_ast(line) == _module_ast("x = 1\n")
    assert quote("wgmma") == '"wgmma"'  # the common case prints as before


# ---- names -----------------------------------------------------------------------------
def test_ident_keeps_names_apart_and_out_of_the_other_namespaces():
    names = ["x", "x_", "x__", "abs", "abs_", "range", "locals", "self", "if_region_0",
             "if_region_0_", "start_1", "tcm", "cute", "A_ptr", "j_1", "i1"]
    spelled = [ident(n) for n in names]
    assert len(set(spelled)) == len(names)
    for n, s in zip(names, spelled):
        assert s == (n + "_" if clashes(n) else n)
        assert s not in MODULE_NAMES and not hasattr(builtins, s)
    assert ident("x") == "x" and ident("abs") == "abs_" and ident("x_") == "x__"


CLASHING = '''
N = T.symbolic("N")
f_kernel0 = T.symbolic("f_kernel0")

@T.prim_func
def f(A: T.Tensor((N,), "int32"), C: T.Tensor((N,), "int32"), B: T.Tensor((f_kernel0,), "int32"),
      abs: T.int32, math: T.int32, range: T.int32, locals: T.int32, self: T.int32,
      if_region_0: T.int32, tcm: T.int32):
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for i in T.Parallel(128):
            start_0 = T.abs(A[bx * 128 + i]) + abs + math + tcm
            C[bx * 128 + i] = start_0 * self
        for k in T.serial(N // 1024):
            if k < range + locals:
                C[k] = C[k] + if_region_0 + B[0]
'''


def test_names_python_cute_dsl_and_the_generator_use_compile(tmp_path):
    """A scalar `abs` beside T.abs, builtins CuTe DSL's rewritten loops call (`range`,
    `locals`), its own names (`self`, `if_region_0`, `start_0`), a helper alias (`tcm`),
    and a symbol named like the old kernel function (`f_kernel0` in `f`)."""
    func = from_script(CLASHING)
    source = emit_cute(lower(func, "sm_90a"))
    assert "abs_ + math + tcm_" in source and "def tilecute_f_0(" in source
    info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    assert list(info.kernels) == ["tilecute_f_0"]


@pytest.mark.parametrize("name", ["C", "scale"])
def test_a_parameter_named_like_its_function_compiles(name, tmp_path):
    """TileLang takes `def kernel(data, kernel)`: the function's name (the launch wrapper
    at module level) and a parameter's (the kernel's and the wrapper's locals) are
    different scopes."""
    func = from_script(PROGRAM.replace("def f(", f"def {name}("))
    source = emit_cute(lower(func, "sm_90a"))
    assert f"def {name}(A_ptr: cute.Pointer, C_ptr: cute.Pointer" in source
    ast.parse(source)
    if name == "C":
        info = tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
        assert list(info.kernels) == ["tilecute_C_0"]


@pytest.mark.parametrize("name", ["cute", "cutlass", "placeholder_args", "tc_smem", "tilecute_f_0"])
def test_names_of_the_generated_module_are_refused(name):
    program = PROGRAM.replace("scale", name)
    with pytest.raises(ValidationError, match=f"prim_func 'f'.*'{name}' is reserved"):
        lower(from_script(program))


def test_a_buffer_named_like_the_shared_memory_base_is_refused():
    program = PROGRAM.replace("        for i in T.Parallel(128):",
                              "        tc_smem = T.alloc_shared((128,), \"int32\")\n"
                              "        for i in T.Parallel(128):")
    func = from_script(program)  # the frontend renames a program's reserved-looking name
    assert "utc_smem = T.alloc_shared" in func.script() and lower(func)
    from tilecute.ir.serialize import from_json
    with pytest.raises(ValidationError, match="'tc_smem' is reserved"):  # IR must not use it
        lower(from_json(func.to_json().replace("utc_smem", "tc_smem")))


@pytest.mark.parametrize("name", ["range", "abs", "tcm"])
def test_a_function_named_like_a_name_the_module_needs_is_refused(name):
    program = PROGRAM.replace("def f(", f"def {name}(")
    with pytest.raises(CodegenError, match=f"<script>:5: prim_func '{name}': .*rename the function"):
        emit_cute(lower(from_script(program)))


def test_a_dunder_name_is_refused():
    program = PROGRAM.replace("scale", "__scale")
    try:
        plan = lower(from_script(program))
    except ValidationError as e:  # the validator may refuse it first
        assert "__scale" in str(e)
        return
    with pytest.raises(CodegenError, match="prim_func 'f': the name '__scale' starts with '__'"):
        emit_cute(plan)
