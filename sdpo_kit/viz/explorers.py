"""Explorers for the notebooks: a figure with sliders in Jupyter, the same figure at the defaults headless.

``explore(draw, **controls)`` calls ``draw(**defaults)`` once and returns what it returned, so a check
cell can assert what the figure shows. In a Jupyter / Colab kernel with ipywidgets it also shows
``ipywidgets.interactive`` over the controls: moving a slider redraws the figure in its output area.
A kernel run headless (``MPLBACKEND=Agg``: CI, the docs site's executed copies) shows the figure at the
defaults as a plain image instead, which a page without widgets can show.
``draw`` returns a matplotlib ``Figure`` (Figure API, no pyplot) or a tuple whose first item is one.

A control is ``(low, high, step, default)`` (an int slider when all four are ints, else a float
slider), a list of options (a dropdown; the first is the default), or a fixed value.

Left out on purpose: linked or multi-figure layouts; an explorer is one figure.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from sdpo_kit.viz.plots import in_notebook


def default(control):
    """The value a control starts at (and the headless run uses)."""
    if isinstance(control, tuple) and len(control) == 4:
        return control[3]
    if isinstance(control, list):
        return control[0]
    return control


def figure_png(fig: Figure) -> bytes:
    """A Figure as PNG bytes, without pyplot."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _widget(name: str, control):
    import ipywidgets as w

    if isinstance(control, tuple) and len(control) == 4:
        low, high, step, value = control
        kind = w.IntSlider if all(isinstance(x, int) for x in control) else w.FloatSlider
        return kind(min=low, max=high, step=step, value=value, description=name, continuous_update=False)
    if isinstance(control, list):
        return w.Dropdown(options=control, value=control[0], description=name)
    return w.fixed(control)


def explore(draw: Callable, **controls):
    """``draw(**defaults)``'s result; in a kernel also the interactive figure (module docstring)."""
    result = draw(**{k: default(c) for k, c in controls.items()})
    if in_notebook():
        try:
            import ipywidgets
        except ImportError:  # no sliders: the default figure only
            ipywidgets = None
        from IPython.display import Image, display

        def show(**values):
            out = draw(**values)
            display(Image(data=figure_png(out[0] if isinstance(out, tuple) else out), format="png"))

        import matplotlib

        if ipywidgets is not None and matplotlib.get_backend().lower() != "agg":
            display(ipywidgets.interactive(show, **{k: _widget(k, c) for k, c in controls.items()}))
        else:   # no sliders, or no one to move them: the figure at the defaults
            display(Image(data=figure_png(result[0] if isinstance(result, tuple) else result), format="png"))
    return result
