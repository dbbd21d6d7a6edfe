"""TileLang's rasterization plans (the block order a roller hint carries): plain
descriptions, each with its ``panel_width``.  A tilecute program sets its block order with
``T.use_swizzle(panel_size, order)``; these classes only name the plans."""

from __future__ import annotations


class Rasterization:
    panel_width_ = None

    @property
    def panel_width(self):
        if self.panel_width_ is None:
            raise ValueError(f"{type(self).__name__} has no panel width")
        return self.panel_width_

    def get_code(self) -> list:
        raise NotImplementedError(f"{type(self).__name__}.get_code: TileLang's CUDA C snippet; "
                                  "tilecute's block order is T.use_swizzle(panel_size, order)")


class NoRasterization(Rasterization):
    def __repr__(self) -> str:
        return "<NoRasterization>"

    def get_code(self) -> list:
        return []


class Rasterization2DRow(Rasterization):
    """Blocks walk the grid in panels of ``panel_width`` rows."""

    def __init__(self, panel_width: int = 4):
        self.panel_width_ = panel_width

    def __repr__(self) -> str:
        return f"<Rasterization2DRow({self.panel_width_})>"


class Rasterization2DColumn(Rasterization):
    """Blocks walk the grid in panels of ``panel_width`` columns."""

    def __init__(self, panel_width: int = 4):
        self.panel_width_ = panel_width

    def __repr__(self) -> str:
        return f"<Rasterization2DColumn({self.panel_width_})>"
