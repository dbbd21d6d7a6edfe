"""TileLang's ``tilelang.cuda`` under tilecute's name: :mod:`tilecute.cuda.intrinsics`
(``make_mma_swizzle_layout``).  TileLang's CUDA backend itself (codegen, NVRTC, its TIR
MMA emitters) has no counterpart: tilecute lowers to CuTe DSL."""
