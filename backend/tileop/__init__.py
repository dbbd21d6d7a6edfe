"""TileLang's ``tilelang.tileop``: ``tileop.base.GemmWarpPolicy`` is ``T.GemmWarpPolicy``."""
