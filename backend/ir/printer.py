"""Print a PrimFunc as a ``T.*`` script that reads like the frontend and re-parses
(``tilecute.language.from_script``) to an equal PrimFunc."""

from __future__ import annotations

from . import nodes as N

# precedence of Python operators, higher binds tighter
_BINARY = {
    "add": ("+", 11), "sub": ("-", 11), "mul": ("*", 12), "div": ("/", 12),
    "floordiv": ("//", 12), "mod": ("%", 12), "bitand": ("&", 8), "bitor": ("|", 6),
    "bitxor": ("^", 7), "shl": ("<<", 10), "shr": (">>", 10),
}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_PREC_CMP, _PREC_NOT, _PREC_AND, _PREC_OR, _PREC_ATOM = 5, 4, 3, 2, 100


def expr_str(e: N.Expr) -> str:
    return _expr(e)[0]


def _paren(e: N.Expr, min_prec: int) -> str:
    text, prec = _expr(e)
    return f"({text})" if prec < min_prec else text


def _const(e: N.Const) -> str:
    if e.dtype == "int32":
        return str(e.value)
    if e.dtype == "bool":
        return str(bool(e.value))
    if isinstance(e.value, float) and e.value != e.value or e.value in (float("inf"), float("-inf")):
        return f'T.{e.dtype}(float("{e.value!r}"))'
    return f"T.{e.dtype}({e.value!r})"


def _expr(e: N.Expr) -> tuple[str, int]:
    if isinstance(e, N.Var):
        return e.name, _PREC_ATOM
    if isinstance(e, N.Const):
        text = _const(e)
        return text, (_PREC_ATOM if not text.startswith("-") else 13)
    if isinstance(e, N.BinOp):
        if e.op in ("min", "max"):
            return f"T.{e.op}({expr_str(e.a)}, {expr_str(e.b)})", _PREC_ATOM
        sym, prec = _BINARY[e.op]
        return f"{_paren(e.a, prec)} {sym} {_paren(e.b, prec + 1)}", prec
    if isinstance(e, N.Cmp):
        return f"{_paren(e.a, _PREC_CMP + 1)} {_CMP[e.op]} {_paren(e.b, _PREC_CMP + 1)}", _PREC_CMP
    if isinstance(e, N.Logic):
        prec = _PREC_AND if e.op == "and" else _PREC_OR
        return f" {e.op} ".join(_paren(a, prec + 1) for a in e.args), prec
    if isinstance(e, N.Not):
        return f"not {_paren(e.a, _PREC_NOT)}", _PREC_NOT
    if isinstance(e, N.Cast):
        return f'T.Cast("{e.dtype}", {expr_str(e.value)})', _PREC_ATOM
    if isinstance(e, N.Select):
        return f"T.if_then_else({expr_str(e.cond)}, {expr_str(e.a)}, {expr_str(e.b)})", _PREC_ATOM
    if isinstance(e, N.Load):
        return f"{e.buffer}[{', '.join(expr_str(i) for i in e.indices)}]", _PREC_ATOM
    if isinstance(e, N.Call):
        args = ", ".join(expr_str(a) for a in e.args)
        if e.name == "thread_idx":
            return f"T.get_thread_binding({args})", _PREC_ATOM
        if e.name == "round_ties_away_from_zero":
            return f'T.round({args}, "ties-away-from-zero")', _PREC_ATOM
        if e.name == "reinterpret":
            return f'T.reinterpret({args}, "{e.dtype}")', _PREC_ATOM
        if e.name in N.IEEE_FORMS and e.name != "ieee_frsqrt":
            *operands, mode = e.args
            return (f"T.{e.name}({', '.join(expr_str(a) for a in operands)}, "
                    f'"{N.IEEE_ROUNDINGS[int(mode.value)]}")'), _PREC_ATOM
        names = {"ffs": "__ffs", "fns": "__fns", "match_any": "match_any_sync",
                 "match_all": "match_all_sync", "warp_activemask": "tvm_warp_activemask"}
        if e.name in names:
            return f"T.{names[e.name]}({args})", _PREC_ATOM
        if e.name == "atomic_load":
            order = N.MEMORY_ORDERS[int(e.args[1].value)]
            return f'T.atomic_load({expr_str(e.args[0])}, memory_order="{order}")', _PREC_ATOM
        if e.name in N.ATOMIC_RETURNS:
            op = e.name[len("atomic_"):-len("_ret")]
            order = N.MEMORY_ORDERS[int(e.args[2].value)]
            args = ", ".join(expr_str(a) for a in e.args[:2])
            more = f', memory_order="{order}"' if order != "relaxed" else ""
            return f"T.atomic_{op}({args}, return_prev=True{more})", _PREC_ATOM
        if e.name in ("rng_uniform", "rng_normal"):
            more = [f"bit={e.dtype[5:]}"] if e.dtype == "float64" else []
            more += ['dist="normal"'] if e.name == "rng_normal" else []
            return f"T.rng_rand_float({', '.join(more)})", _PREC_ATOM
        return f"T.{e.name}({args})", _PREC_ATOM
    raise TypeError(f"printer: unknown expression {type(e).__name__}")


def _tuple(items) -> str:
    items = list(items)
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _region(r: N.Region) -> str:
    if r.extents is None:
        if all(isinstance(s, N.Const) and s.value == 0 for s in r.starts):
            return r.buffer
        return f"{r.buffer}[{', '.join(expr_str(s) for s in r.starts)}]"
    parts = []
    for s, x in zip(r.starts, r.extents):
        stop = expr_str(N.binop("add", s, x))
        parts.append(f"{expr_str(s)}:{stop}")
    return f"{r.buffer}[{', '.join(parts)}]"


def gemm_operand(name: str, index: tuple, part: tuple = ()) -> str:
    """A T.gemm operand as the program writes it: ``A_s``, one matrix ``A_s[s, :, :]``, or
    a part of one ``Q_s[0:64, 256:512]``."""
    if not index and not part:
        return name
    last = [f"{expr_str(st)}:{expr_str(N.binop('add', st, N.as_expr(n)))}" for st, n in part] \
        or [":", ":"]
    return f"{name}[{', '.join([expr_str(i) for i in index] + last)}]"


def _flag(x) -> str:
    """A bool argument that may be an expression (T.gemm's clear_accum)."""
    return expr_str(x) if isinstance(x, N.Expr) else str(x)


def _loop_range(s: N.For) -> str:
    fn = {"serial": "T.serial", "unrolled": "T.vectorized" if s.vectorized else "T.unroll",
          "parallel": "T.Parallel", "pipelined": "T.Pipelined"}[s.kind]
    zero = isinstance(s.start, N.Const) and s.start.value == 0
    bounds = expr_str(s.extent) if zero else f"{expr_str(s.start)}, {expr_str(N.binop('add', s.start, s.extent))}"
    if s.kind == "pipelined":
        bounds += f", num_stages={s.num_stages}"
        if s.warp_specialize is not None:
            bounds += f", warp_specialize={s.warp_specialize}"
        if s.overlap_mma:
            bounds += ", overlap_mma=True"
        if s.loads_last:
            bounds += f", loads_last={tuple(s.loads_last)!r}"
        if s.stage_base is not None:
            bounds += f", stage_base={expr_str(s.stage_base)}"
    if s.vector_width:
        bounds += f", vector_width={s.vector_width}"
    if s.replicated:
        bounds += ", replicated=True"
    if s.async_copy:
        bounds += ", async_copy=True"
    if s.copy_instruction:
        bounds += f', copy_instruction="{s.copy_instruction}"'
    if s.loop_layout is not None:
        bounds += f", loop_layout={layout_str(s.loop_layout)}"
    if s.unroll_factor:
        bounds += f", unroll_factor={s.unroll_factor}"
    if s.fill_stage is not None:
        bounds += f", fill_stage={expr_str(s.fill_stage)}"
    return f"{fn}({bounds})"


def layout_str(layout: N.Layout) -> str:
    args = [f'"{layout.kind}"']
    for name in ("threads", "vector", "swizzle", "mma", "warps", "operand", "first_thread", "flat"):
        value = getattr(layout, name)
        if value:
            args.append(f'{name}="{value}"' if isinstance(value, str) else f"{name}={value}")
    return f"T.Layout({', '.join(args)})"


def _stmts(body, indent: int, out: list[str]) -> None:
    pad = "    " * indent
    if not body:
        out.append(pad + "pass")
    for s in body:
        _stmt(s, indent, out)


def stmt_str(s: N.Stmt) -> str:
    """One statement as the printer writes it (its first line for a compound one)."""
    out: list[str] = []
    _stmt(s, 0, out)
    return out[0]


def _stmt(s: N.Stmt, indent: int, out: list[str]) -> None:
    pad = "    " * indent
    if isinstance(s, N.For):
        out.append(f"{pad}for {s.var.name} in {_loop_range(s)}:")
        _stmts(s.body, indent + 1, out)
    elif isinstance(s, N.While):
        out.append(f"{pad}while {expr_str(s.cond)}:")
        _stmts(s.body, indent + 1, out)
    elif isinstance(s, N.SafeValueScope):
        name = f'"{s.name}"' if '"' not in s.name and "\\" not in s.name else repr(s.name)
        out.append(f"{pad}with T.sblock({name}):")
        pairs = ", ".join(f"{name}: {expr_str(v)}" for name, v in s.values)
        out.append(f"{pad}    T.annotate_safe_value({{{pairs}}})")
        _stmts(s.body, indent + 1, out)
    elif isinstance(s, N.If):
        out.append(f"{pad}if {expr_str(s.cond)}:")
        _stmts(s.then, indent + 1, out)
        if s.orelse:
            out.append(f"{pad}else:")
            _stmts(s.orelse, indent + 1, out)
    elif isinstance(s, N.WarpGroups) and s.span:  # whole warps: the branch that makes one
        out.append(f"{pad}if {s.span[0]} <= T.get_thread_binding() < {s.span[1]}:")
        _stmts(s.body, indent + 1, out)
    elif isinstance(s, N.WarpGroups):
        out.append(f"{pad}with T.ws({', '.join(map(str, s.groups))}):")
        _stmts(s.body, indent + 1, out)
    elif isinstance(s, N.Let):
        below = f"  # below {expr_str(s.within)}" if s.within is not None else ""
        out.append(f"{pad}{s.var.name} = {_typed(s.value, s.var.dtype)}{below}")
    elif isinstance(s, N.Store):
        out.append(f"{pad}{s.buffer}[{', '.join(expr_str(i) for i in s.indices)}] = {expr_str(s.value)}")
    elif isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and \
            s.value.name == "ptx_cp_async":
        dst, src, n = s.value.args
        out.append(f'{pad}T.ptx_cp_async(T.access_ptr({expr_str(dst)}, "w", {expr_str(n)}), '
                   f'T.access_ptr({expr_str(src)}, "r", {expr_str(n)}), {expr_str(n)})')
    elif isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and \
            s.value.name == "ptx_wait_group":
        out.append(f"{pad}T.ptx_wait_group({expr_str(s.value.args[0])})")
    elif isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and \
            s.value.name in N.STMT_CALLS:
        out.append(f"{pad}T.{s.value.name}()")
    elif isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and \
            s.value.name in ("rng_init", "assume"):
        out.append(f"{pad}{expr_str(s.value)}")
    elif isinstance(s, N.Evaluate):
        out.append(f"{pad}T.evaluate({expr_str(s.value)})")
    elif isinstance(s, N.SetMaxNReg):
        out.append(f"{pad}T.set_max_nreg({s.count}, {int(s.increase)})")
    elif isinstance(s, N.Allocate):
        b = s.buffer
        shape = _tuple(expr_str(d) for d in b.shape)
        if s.layout is not None and s.layout.kind == "mbarrier":  # TileLang's signature
            n, count = b.shape[0].value, s.layout.threads
            arg = str(count) if n == 1 else f"[{count}] * {n}"
            out.append(f"{pad}{b.name} = T.alloc_barrier({arg})")
            return
        layout = f", layout={layout_str(s.layout)}" if s.layout is not None else ""
        if s.view_of and s.view_offset is not None:  # TVM's buffer view at an element offset
            out.append(f'{pad}{b.name} = T.Buffer({shape}, "{b.dtype}", data={s.view_of}.data, '
                       f'elem_offset={expr_str(s.view_offset)})')
            return
        if s.view_of:  # TileLang's T.view of another buffer's storage
            out.append(f'{pad}{b.name} = T.view({s.view_of}, {shape}, "{b.dtype}"{layout})')
            return
        if s.address is not None:  # TileLang's tensor at an address
            strides = "" if b.strides is None else \
                f", strides={_tuple(expr_str(d) for d in b.strides)}"
            out.append(f'{pad}{b.name} = T.make_tensor({expr_str(s.address)}, {shape}, '
                       f'"{b.dtype}"{strides})')
            return
        stages = f", stages={s.stages}" if s.stages > 1 else ""
        if s.reducer:
            out.append(f'{pad}{b.name} = T.alloc_reducer({shape}, "{b.dtype}", op="{s.reducer}", '
                       f'replication="all"{layout})')
            return
        out.append(f'{pad}{b.name} = T.alloc_{b.scope}({shape}, "{b.dtype}"{layout}{stages})')
    elif isinstance(s, N.Barrier):
        out.append(f"{pad}T.sync_threads({'wait_async=True' if s.wait_async else ''})"
                   + ("  # fence.proxy.async first (a TMA load follows)" if s.fence_proxy else ""))
    elif isinstance(s, N.Copy):
        kw = ", disable_tma=True" if s.disable_tma else ""
        if s.instruction and s.instruction != N.ASYNC_COPY:
            kw += f', prefer_instruction="{s.instruction}"'
        if s.vector_width:
            kw += f", coalesced_width={s.vector_width}"
        if s.loop_layout is not None:
            kw += f", loop_layout={layout_str(s.loop_layout)}"
        form = "T.async_copy" if s.instruction == N.ASYNC_COPY else "T.copy"
        out.append(f"{pad}{form}({_region(s.src)}, {_region(s.dst)}{kw})")
    elif isinstance(s, N.TmaCopy):
        kw = ""
        if s.barrier is not None:
            kw += f", barrier={_region(s.barrier)}"
        if s.stage is not None:
            kw += f", stage={expr_str(s.stage)}"
        if s.barrier is not None and s.arrive:
            kw += ", arrive=True"
        if s.multicast:
            kw += f", multicast={s.multicast}"
        if not s.wait_read:
            kw += ", wait_read=False"
        if s.required:
            kw += ", required=True"
        if s.leader_threads:
            kw += f", leader_scope_threads={s.leader_threads}"
        if s.reduce == "add":  # TileLang's TMA reduce-store: the destination first
            out.append(f"{pad}T.atomic_add({_region(s.dst)}, {_region(s.src)}, use_tma=True{kw})")
        else:
            out.append(f"{pad}T.tma_copy({_region(s.src)}, {_region(s.dst)}{kw})")
    elif isinstance(s, N.ClusterCopy):
        kw = f", remote_barrier={_region(s.barrier)}" if s.barrier is not None else ""
        out.append(f"{pad}T.copy_cluster({_region(s.src)}, {_region(s.dst)}, "
                   f"dst_block={expr_str(s.block)}{kw})")
    elif isinstance(s, N.MBarrierArrive):
        fn = "cp_async_barrier_noinc" if s.cp_async else "mbarrier_arrive"
        kw = f", cluster={s.cluster}" if s.cluster else ""
        block = f", {expr_str(s.block)}" if s.block is not None else ""
        out.append(f"{pad}T.{fn}({_region(s.barrier)}{block}{kw})")
    elif isinstance(s, N.ClusterSync):
        out.append(f"{pad}T.cluster_{s.kind}()")
    elif isinstance(s, N.TmaStoreWait):
        args = ([str(s.count)] if s.count else []) + ([] if s.read else ["read=False"])
        out.append(f"{pad}T.tma_store_wait({', '.join(args)})")
    elif isinstance(s, N.TmaStoreArrive):
        out.append(f"{pad}T.tma_store_arrive()")
    elif isinstance(s, N.AsyncCopyWait):
        out.append(f"{pad}T.cp_async_wait()")
    elif isinstance(s, N.MBarrierWait):
        out.append(f"{pad}T.mbarrier_wait_parity({_region(s.barrier)}, {expr_str(s.parity)})")
    elif isinstance(s, N.Fill):
        out.append(f"{pad}T.fill({_region(s.dst)}, {expr_str(s.value)})")
    elif isinstance(s, N.Clear):
        out.append(f"{pad}T.clear({s.buffer})")
    elif isinstance(s, N.Gemm):
        wait = f", wg_wait={s.wg_wait}" if s.wg_wait and not s.wgmma_only else ""
        fn = "wgmma_gemm" if s.wgmma_only else "gemm"
        policy = f", policy=T.GemmWarpPolicy.{s.policy}" if s.policy != "Square" else ""
        stage = f", stage={expr_str(s.stage)}" if s.stage is not None else ""
        # (the tensor-core families show in C's layout: mma="wgmma" / "mma")
        stage += f", family={s.family!r}" if s.family == "simt" else ""
        out.append(f"{pad}T.{fn}({gemm_operand(s.a, s.a_index, s.a_part)}, "
                   f"{gemm_operand(s.b, s.b_index, s.b_part)}, "
                   f"{s.c}, transpose_A={s.transpose_a}, "
                   f"transpose_B={s.transpose_b}, clear_accum={_flag(s.clear_accum)}{policy}{wait}{stage})")
    elif isinstance(s, N.NamedBarrier) and s.program:
        fn = "named_barrier_arrive" if s.arrive else "sync_threads"
        out.append(f"{pad}T.{fn}({expr_str(s.barrier_id)}, {s.threads})")
    elif isinstance(s, N.NamedBarrier):
        fn = "named_barrier_arrive" if s.arrive else "named_barrier_sync"
        out.append(f"{pad}T.{fn}({expr_str(s.barrier_id)}, {s.threads})")
    elif isinstance(s, N.WarpSync):
        out.append(f"{pad}T.sync_warp({'' if s.mask is None else expr_str(s.mask)})")
    elif isinstance(s, N.WaitWgmma):
        out.append(f"{pad}T.wait_wgmma({s.pending})"
                   + (f"  # after the writes of {s.after}" if s.after else ""))
    elif isinstance(s, N.DevicePrint):
        args = [] if s.value is None else [expr_str(s.value)]
        args.append(f"msg={s.msg!r}")
        if s.buffer:
            args += [f"buffer={s.buffer!r}", f"index={expr_str(s.index)}"]
        out.append(f"{pad}T.print({', '.join(args)})")
    elif isinstance(s, N.DeviceAssert):
        out.append(f"{pad}T.device_assert({expr_str(s.cond)}, {s.msg!r}, no_stack_info=True)")
    elif isinstance(s, N.Reduce):
        scratch = f", scratch={s.scratch}" if s.scratch else ""
        nan = ", nan_propagate=True" if s.nan_propagate else ""
        scratch += "" if s.sync_after else ", sync_after=False"
        scratch += ", partial=True" if s.partial else ""
        out.append(f"{pad}T.reduce_{s.kind}({s.src}, {s.dst}, dim={s.dim}, clear={s.clear}{nan}{scratch})")
    elif isinstance(s, N.Scan):
        fn = {"sum": "cumsum", "max": "cummax"}[s.kind]
        out.append(f"{pad}T.{fn}({s.src}, {s.dst}, dim={s.dim}, reverse={s.reverse})")
    elif isinstance(s, N.FinalizeReducer):
        scratch = f", scratch={s.scratch}" if s.scratch else ""
        out.append(f"{pad}T.finalize_reducer({s.buffer}{scratch})")
    elif isinstance(s, N.ThreadAllReduce):
        params = ", ".join(v.name for v in s.lhs + s.rhs)
        res = ", ".join(expr_str(r) for r in s.results)
        res = f"({res})" if len(s.results) > 1 else res
        ident = ", ".join(expr_str(i) for i in s.identity)
        args = [f"T.uint32({len(s.values)})", *(expr_str(v) for v in s.values), "True",
                *(f"{d}[0]" for d in s.dsts), *(f"T.get_thread_binding({d})" for d in s.dims)]
        scratch = f", scratch=[{', '.join(s.scratch)}]" if s.scratch else ""
        out.append(f"{pad}with T.attr(T.comm_reducer(lambda {params}: {res}, [{ident}]), "
                   f'"reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):')
        out.append(f"{pad}    T.evaluate(T.tvm_thread_allreduce({', '.join(args)}, "
                   f'dtype="handle"{scratch}))')
    elif isinstance(s, N.SegmentReduce):
        out.append(f"{pad}T.reduce_segments({s.src}, {s.dst}, {s.kind!r}, width={s.width}"
                   f"{', nan_propagate=True' if s.nan_propagate else ''}"
                   f"{', axis=0' if s.axis == 0 else ''})")
    elif isinstance(s, N.CombineRows):
        scratch = f", scratch={s.scratch}" if s.scratch else ""
        out.append(f"{pad}T.combine_rows({s.buffer}, {s.kind!r}{scratch})")
    elif isinstance(s, N.Im2Col):
        out.append(f"{pad}T.im2col({s.img}, {s.col}, {expr_str(s.nhw_step)}, {expr_str(s.c_step)}, "
                   f"{s.kernel}, {s.stride}, {s.dilation}, {s.pad})")
    elif isinstance(s, N.AtomicAdd):
        value = _region(s.value) if isinstance(s.value, N.Region) else expr_str(s.value)
        default = {"store": "seq_cst"}.get(s.op, "relaxed")  # TileLang's default order
        order = f', memory_order="{s.order}"' if s.order != default else ""
        dst = _region(s.dst)
        if s.op in ("or", "store") or not isinstance(s.value, N.Region) and s.dst.extents is None:
            # one element, written as one (flag[0], not flag: a bare buffer is all of it)
            dst = f"{s.dst.buffer}[{', '.join(expr_str(i) for i in s.dst.starts)}]"
        out.append(f"{pad}T.atomic_{s.op}({dst}, {value}{order})")
    elif isinstance(s, N.KernelScope):
        args = [expr_str(g) for g in s.grid]
        threads = str(s.threads[0]) if len(s.threads) == 1 else _tuple(str(t) for t in s.threads)
        args.append(f"threads={threads}")
        if s.cluster is not None:
            args.append(f"cluster={_tuple(str(c) for c in s.cluster)}")
        if s.producer_threads:
            args.append(f"producer_threads={s.producer_threads}")
        names = s.block_vars[0].name if len(s.block_vars) == 1 else _tuple(v.name for v in s.block_vars)
        out.append(f"{pad}with T.Kernel({', '.join(args)}) as {names}:")
        if s.min_blocks_per_sm:
            out.append(f"{pad}    T.annotate_min_blocks_per_sm({s.min_blocks_per_sm})")
        if s.producer_regs:
            out.append(f"{pad}    T.annotate_producer_reg_dealloc({s.producer_regs})")
        if s.consumer_regs:
            out.append(f"{pad}    T.annotate_consumer_reg_alloc({s.consumer_regs})")
        if not s.reg_alloc:
            out.append(f"{pad}    T.no_set_max_nreg()")
        if s.safe_values:
            pairs = ", ".join(f"{name}: {expr_str(v)}" for name, v in s.safe_values)
            out.append(f"{pad}    T.annotate_safe_value({{{pairs}}})")
        if s.l2_hit_ratios:
            pairs = ", ".join(f"{name}: {ratio!r}" for name, ratio in s.l2_hit_ratios)
            out.append(f"{pad}    T.annotate_l2_hit_ratio({{{pairs}}})")
        _stmts(s.body, indent + 1, out)
    else:
        raise TypeError(f"printer: unknown statement {type(s).__name__}")


def _typed(e: N.Expr, dtype: str) -> str:
    return expr_str(e)


def _param(p: N.Param, pointers=()) -> str:
    if isinstance(p, N.Var):
        return f"{p.name}: T.ptr" if p.name in pointers else f"{p.name}: T.{p.dtype}"
    shape = _tuple(expr_str(d) for d in p.shape)
    if p.strides is None:
        return f'{p.name}: T.Tensor({shape}, "{p.dtype}")'
    strides = _tuple(expr_str(d) for d in p.strides)
    return f'{p.name}: T.StridedTensor({shape}, {strides}, "{p.dtype}")'


def print_func(f: N.PrimFunc) -> str:
    out: list[str] = ["import tilecute.language as T", ""]
    for s in f.symbols:
        dtype = f', "{s.dtype}"' if s.dtype != "int32" else ""
        multiple = f", multiple_of={s.multiple}" if s.multiple > 1 else ""
        out.append(f'{s.name} = T.symbolic("{s.name}"{dtype}{multiple})')
    if f.symbols:
        out.append("")
    out.append("")
    out.append("@T.prim_func")
    ws = set(f.workspaces)
    given = [p for p in f.params if p.name not in ws]
    # TileLang's T.empty outputs (out_idx, negative: the last parameters before the
    # workspaces, in return order) print as T.empty statements and a return
    returned = [given[i] for i in f.out_idx] if f.out_idx is not None else []
    outs = {p.name for p in returned}
    out.append(f"def {f.name}({', '.join(_param(p, f.pointers) for p in given if p.name not in outs)}):")
    if f.pass_configs:
        configs = ", ".join(f"{k!r}: {v!r}" for k, v in f.pass_configs)
        out.append(f"    T.annotate_pass_configs({{{configs}}})")
    if f.compile_flags:
        out.append(f"    T.annotate_compile_flags({list(f.compile_flags)!r})")
    for a in f.assumes:  # checked at launch (PrimFunc.assumes)
        out.append(f"    T.assume({expr_str(a)})")
    for p in returned:
        out.append(f'    {p.name} = T.empty({_tuple(expr_str(d) for d in p.shape)}, "{p.dtype}")')
    for p in f.params:
        if p.name in ws:
            out.append(f'    {p.name} = T.alloc_global({_tuple(expr_str(d) for d in p.shape)}, '
                       f'"{p.dtype}")')
    _stmts(f.kernels, 1, out)
    if returned:
        out.append(f"    return {', '.join(p.name for p in returned)}")
    return "\n".join(out) + "\n"
