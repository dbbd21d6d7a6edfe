"""TileLang's ``tilelang.tileop.base``: ``GemmWarpPolicy`` (``T.GemmWarpPolicy``)."""

from ..language.values import GemmWarpPolicy  # noqa: F401
