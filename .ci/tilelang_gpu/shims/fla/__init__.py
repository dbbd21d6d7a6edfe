"""Torch reference stand-in for ``fla`` (flash-linear-attention), used only by
``.ci/tilelang_gpu/run_example.py`` when the real package is not installed, so that TileLang's
examples whose *reference* calls fla (gated delta rule pieces, linear attention, NSA helpers)
can run their own checks under tilecute.

Only the functions those examples import are here, at the module paths they import them from,
with fla's signatures (as of the fla commit the examples name, f03cb3ae) and fla's meaning,
written from that meaning in plain torch with float32 math (``_reference.py``).  Variable-length
batches (``cu_seqlens``) are modelled where the examples could pass them cheaply (cumsum, token
indices); elsewhere a ``cu_seqlens`` raises ``NotImplementedError`` rather than being ignored."""

__version__ = "0.2.1+tilecute.torch_reference"
