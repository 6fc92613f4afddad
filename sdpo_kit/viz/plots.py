"""Live training plots: one dashboard that redraws in place in Jupyter and writes a PNG headless.

* ``LivePlot(panels, title, png_path, every, max_cols)``: call it with each metrics dict (it is
  a ``GRPOScratchTrainer`` callback: ``GRPOScratchTrainer(..., callbacks=[plot])``). Inside a Jupyter / Colab
  kernel it redraws on ONE display handle (``display(..., display_id=True)`` once, then
  ``handle.update``), never blocks and never calls ``plt.show()``. Headless it only writes
  ``png_path`` (when set) and never opens a window. It draws with the matplotlib Figure API
  (``Figure`` + ``FigureCanvasAgg``), not pyplot, so it works under ``MPLBACKEND=Agg`` and
  leaves no figure open in pyplot. Every metric, plotted or not, is kept in ``plot.history``.
* ``metrics_from_trl_logs(logs, step)`` (``sdpo_kit.core.metrics``): TRL 1.16
  ``GRPOTrainer`` log names -> sdpo_kit's (``reward`` -> ``reward/mean``, ...).
* ``LivePlotCallback(plot)``: a ``transformers.TrainerCallback`` that feeds a ``LivePlot``
  from any TRL / transformers trainer's logs and writes the PNG at the end of training.

What to draw is a tuple of ``viz.panels.Panel`` (``DEFAULT_PANELS``, plus an algorithm's own, declared in its
package). A panel with no data yet says so.

Left out on purpose: zoom / widget controls, smoothing and multi-run overlays (plot
``plot.history`` yourself), and any pyplot state.
"""

from __future__ import annotations

import io
import math
import numbers
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from transformers.trainer_callback import TrainerCallback

from sdpo_kit.core.metrics import SUMMARY_KEY, is_train_summary, metrics_from_trl_logs
from sdpo_kit.viz.panels import DEFAULT_PANELS, Panel

_DPI = 100


def _as_panel(p) -> Panel:
    if isinstance(p, Panel):
        return p
    if isinstance(p, str):
        return Panel(p, (p,))
    if isinstance(p, Sequence) and p and all(isinstance(k, str) for k in p):
        return Panel(", ".join(p), tuple(p))
    raise TypeError(f"a panel is a Panel, a metric key or a tuple of keys, got {p!r}")


def _as_float(value) -> float | None:
    """A finite float, or None for anything that cannot be plotted (None, NaN, inf, text)."""
    if isinstance(value, numbers.Real):
        x = float(value)
    elif hasattr(value, "item"):  # a 0-d torch / numpy value
        try:
            x = float(value.item())
        except (TypeError, ValueError):
            return None
    else:
        return None
    return x if math.isfinite(x) else None


def _in_notebook() -> bool:
    """True inside a Jupyter / Colab kernel (not plain python, pytest or terminal IPython)."""
    ipython = sys.modules.get("IPython")  # a kernel has imported it already; never import it here
    if ipython is None:
        return False
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if get_ipython is not None else None
    if shell is None:
        return False
    return getattr(shell, "kernel", None) is not None or "IPKernelApp" in getattr(shell, "config", {})


def in_notebook() -> bool:
    """Whether this runs inside a Jupyter / Colab kernel (the dashboard and the explorers ask too)."""
    return _in_notebook()


class LivePlot:
    """A live training dashboard.

    Args:
        panels: ``Panel`` objects, metric keys or tuples of keys (one subplot each).
        title: figure title.
        png_path: where each redraw writes the PNG (headless this is the only output).
        every: redraw at most every ``every`` updates (``close`` and ``save`` always flush),
            so a long run pays for a redraw only now and then.
        max_cols: subplots per row.

    ``update(metrics)`` (or calling the plot) appends a copy of ``metrics`` to ``history``
    (with ``step`` = previous step + 1 when the dict has none) and redraws when due.
    ``n_draws`` counts renders.
    """

    def __init__(self, panels: Sequence = DEFAULT_PANELS, title: str | None = None,
                 png_path: str | os.PathLike | None = None, every: int = 1, max_cols: int = 3):
        if int(every) < 1 or int(max_cols) < 1:
            raise ValueError(f"every and max_cols must be >= 1, got every={every}, max_cols={max_cols}")
        self.panels = [_as_panel(p) for p in panels]
        if not self.panels:
            raise ValueError("LivePlot needs at least one panel")
        self.title, self.every, self.max_cols = title, int(every), int(max_cols)
        self.png_path = Path(png_path) if png_path is not None else None
        self.in_notebook = _in_notebook()
        self.history: list[dict] = []
        self.n_draws = 0
        self._pending = 0          # updates since the last render
        self._handle = None        # the one IPython display handle
        self._fig = self._axes = None
        self._png, self._png_rows = None, -1  # last render and how many rows it showed

    # --- data -----------------------------------------------------------------------------
    def update(self, metrics: Mapping) -> None:
        """Record one metrics dict and redraw if ``every`` updates have passed since the last."""
        row = dict(metrics)
        if "step" not in row:
            row["step"] = self.history[-1]["step"] + 1 if self.history else 0
        self.history.append(row)
        self._pending += 1
        if self._pending >= self.every:
            self._flush()

    __call__ = update

    def series(self, key: str) -> tuple[list[float], list[float]]:
        """``(steps, values)`` of every history row where ``key`` has a finite value."""
        steps, values = [], []
        for row in self.history:
            y, x = _as_float(row.get(key)), _as_float(row.get("step"))
            if y is not None and x is not None:
                steps.append(x)
                values.append(y)
        return steps, values

    # --- drawing --------------------------------------------------------------------------
    def _build(self) -> None:
        n = len(self.panels)
        ncols = min(self.max_cols, n)
        nrows = math.ceil(n / ncols)
        width, height = 4.2 * ncols, 3.0 * nrows  # inches
        self._fig = Figure(figsize=(width, height), dpi=_DPI)
        FigureCanvasAgg(self._fig)  # attaches itself to the figure; no pyplot, no window
        # fixed margins in inches: a layout engine re-measures every label on each redraw and
        # costs as much as the drawing itself
        top = 0.45 + (0.35 if self.title else 0.0)
        axis_w = (width - 0.75 - 0.25 - 0.85 * (ncols - 1)) / ncols
        axis_h = (height - top - 0.6 - 0.85 * (nrows - 1)) / nrows
        self._fig.subplots_adjust(left=0.75 / width, right=1 - 0.25 / width, bottom=0.6 / height,
                                  top=1 - top / height, wspace=0.85 / axis_w, hspace=0.85 / axis_h)
        axes = self._fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax in axes[n:]:
            ax.set_visible(False)
        self._axes = list(axes[:n])

    def _draw_panel(self, ax, panel: Panel, xlim: tuple[float, float] | None) -> None:
        ax.set_xlabel("step")
        title, drawn = panel.title, False
        for key in panel.keys:
            steps, values = self.series(key)
            if not steps:
                continue
            drawn = True
            marker = "o" if panel.markers or len(steps) == 1 else None
            (line,) = ax.plot(steps, values, marker=marker, markersize=4, linewidth=1.5, label=key)
            if len(panel.keys) == 1:
                title = f"{panel.title}  [{values[-1]:.3g}]"  # latest value in the title
            if panel.std_key is not None and key == panel.keys[0]:
                band = [(_as_float(r.get("step")), _as_float(r.get(key)), _as_float(r.get(panel.std_key)))
                        for r in self.history]
                band = [b for b in band if None not in b]
                if band:
                    xs = [b[0] for b in band]
                    ax.fill_between(xs, [b[1] - b[2] for b in band], [b[1] + b[2] for b in band],
                                    color=line.get_color(), alpha=0.25, linewidth=0)
        if not drawn:
            ax.text(0.5, 0.5, "no data yet", transform=ax.transAxes, ha="center", va="center",
                    color="0.5")
        elif len(panel.keys) > 1:
            ax.legend(fontsize="small")
        if panel.ylim is not None:
            ax.set_ylim(*panel.ylim)
        if drawn and xlim is not None:
            ax.set_xlim(*xlim)  # one step axis for every panel, so sparse metrics line up
        ax.set_title(title, fontsize="medium")
        ax.grid(alpha=0.3)

    def render(self) -> bytes:
        """Redraw every panel on the one figure; keeps and returns the PNG bytes (the dashboard
        shows them in its own image widget)."""
        if self._fig is None:
            self._build()
        steps = [x for x in (_as_float(r.get("step")) for r in self.history) if x is not None]
        xlim = None
        if steps:
            pad = max(0.5, 0.03 * (max(steps) - min(steps)))
            xlim = (min(steps) - pad, max(steps) + pad)
        for ax, panel in zip(self._axes, self.panels):
            ax.cla()
            self._draw_panel(ax, panel, xlim)
        if self.title:
            self._fig.suptitle(self.title, y=1 - 0.1 / self._fig.get_figheight(), va="top")
        buf = io.BytesIO()
        self._fig.savefig(buf, format="png", dpi=_DPI)
        self.n_draws += 1
        self._png, self._png_rows = buf.getvalue(), len(self.history)
        return self._png

    def png(self) -> bytes:
        """The PNG of every update so far: the last render when it shows them all, else a new one
        (the dashboard's image widget takes it, so a redraw already sent to ``png_path`` is reused)."""
        return self.render() if self._stale or self._png is None else self._png

    @staticmethod
    def _write(path: Path, png: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(png)
        os.replace(tmp, path)  # atomic: a viewer never sees half a PNG

    def _flush(self) -> None:
        """Render and send to the outputs: the one display handle and/or ``png_path``."""
        self._pending = 0
        if not self.in_notebook and self.png_path is None:
            return  # headless with nowhere to draw: rendering would be wasted time
        png = self.render()
        if self.in_notebook:
            import IPython.display as ipd  # looked up at call time, so tests can stand in for it

            image = ipd.Image(data=png, format="png")
            if self._handle is None:
                self._handle = ipd.display(image, display_id=True)
            else:
                self._handle.update(image)
        if self.png_path is not None:
            self._write(self.png_path, png)

    @property
    def _stale(self) -> bool:
        return self._png_rows != len(self.history)

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Write the dashboard with every update so far as a PNG to ``path`` (default
        ``png_path``); returns the path."""
        target = Path(path) if path is not None else self.png_path
        if target is None:
            raise ValueError("LivePlot.save needs a path (no png_path was set)")
        if self._stale or self._png is None:
            self._flush()
            if self._stale or self._png is None:  # headless without png_path: nothing rendered
                self.render()
        self._write(target, self._png)
        return target

    def close(self) -> None:
        """Final draw of any updates not shown yet (display handle and ``png_path``)."""
        if self.history and self._stale:
            self._flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LivePlotCallback(TrainerCallback):
    """Feeds a ``LivePlot`` from a transformers / TRL trainer: ``trainer.add_callback(cb)``.

    ``on_log`` maps the logs with ``metrics_from_trl_logs(logs, state.global_step)`` (summary
    and speed keys dropped; a pure summary log is skipped) and updates the plot;
    ``on_train_end`` closes it (final draw). Headless with no ``png_path``, the PNG goes to
    ``args.output_dir/live_plot.png``. Only the main process draws.

    Args:
        plot: the ``LivePlot`` to feed; when None one is made from ``plot_kwargs``.
    """

    def __init__(self, plot: LivePlot | None = None, **plot_kwargs):
        if plot is not None and plot_kwargs:
            raise TypeError("pass either a LivePlot or LivePlot keyword arguments, not both")
        self.plot = plot if plot is not None else LivePlot(**plot_kwargs)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not getattr(state, "is_world_process_zero", True) or is_train_summary(logs):
            return
        kept = {k: v for k, v in logs.items() if not SUMMARY_KEY.search(k)}
        self.plot.update(metrics_from_trl_logs(kept, state.global_step))

    def on_train_end(self, args, state, control, **kwargs):
        if not getattr(state, "is_world_process_zero", True):
            return
        output_dir = getattr(args, "output_dir", None)
        if self.plot.png_path is None and not self.plot.in_notebook and output_dir:
            self.plot.png_path = Path(output_dir) / "live_plot.png"
            if self.plot.history:
                self.plot.save()  # the earlier draws had nowhere to go
        self.plot.close()
