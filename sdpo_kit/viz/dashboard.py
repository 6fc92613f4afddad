"""The training dashboard: live plots, progress, the latest sampled completions and a stop button.

One ``Dashboard`` for both backends. Pass it as a callback (``GRPOScratchTrainer(..., callbacks=[dash])``,
``build_trl_grpo_trainer(..., callbacks=[dash])``, the other algorithms alike): each metrics row
updates the plot panels (``viz.plots.LivePlot``) and the progress line (step, s/step from
``time/step_s``, time left); each step's sampled completions (``core.completions``) fill the table
(prompt, completion, reward in total and per function, feedback, and for SDPO the teacher prompt and
whether the row had a teacher). The stop button sets ``stop_requested``: the trainer finishes the
step it is in, saves ``output_dir/checkpoint-N`` and returns; ``--resume-from`` (or
``train(resume_from_checkpoint=...)``) continues from there. ``DashboardCallback`` feeds it from any
transformers / TRL trainer that was not built by sdpo_kit (rows and stop, no completions).

Where it shows:

* In a Jupyter / Colab kernel it is one ipywidgets box, displayed once and changed in place. A
  kernel handles a button click only between cells, so ``dash.train(trainer)`` runs the training in
  a thread there (the cell returns at once, the widgets keep redrawing, the stop button works);
  ``dash.wait()`` in a later cell returns the rows. Elsewhere ``train`` runs in the caller's thread.
* Headless (scripts, pytest, ``MPLBACKEND=Agg``) nothing is displayed: the plot goes to ``png_path``
  as ``LivePlot`` writes it, and the completions table is printed as text every ``table_every``
  steps. The widgets still exist when ipywidgets is installed (tests click the button and read the
  table), and nothing fails when it is not.
* A notebook executed headless (nbclient under ``MPLBACKEND=Agg``: CI, the docs site's executed copies)
  also gets the final ``snapshot`` as a plain image output when the run ends: a page that cannot run
  widgets still shows the dashboard.

``train`` returns the metric rows as ``Rows``, a list whose repr is one line (the last row's reward and
accuracy), so a cell ending in ``dash.train(...)`` does not print the whole history.

The dashboard only reads rows: a run's numbers are the same with it or without it.

Left out on purpose: controls that change a running run (learning rate, sampling), multi-run views.
"""

from __future__ import annotations

import html
import io
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from transformers.trainer_callback import TrainerCallback

from sdpo_kit.core.metrics import SUMMARY_KEY, is_train_summary, metrics_from_trl_logs
from sdpo_kit.core.trl_base import train_trl
from sdpo_kit.viz.plots import DEFAULT_PANELS, LivePlot

TEXT_COLUMNS = ("prompt", "completion", "feedback", "teacher_prompt")


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _short(value, width: int) -> str:
    text = "" if value is None else (f"{value:.3g}" if isinstance(value, float) else str(value))
    text = text.replace("\n", " | ")
    return text if len(text) <= width else text[:width - 1] + "…"


def table_columns(rows: Sequence[Mapping]) -> list[str]:
    """The table's columns, in reading order: prompt, completion, rewards, feedback, teacher."""
    keys = list(dict.fromkeys(k for r in rows for k in r if k != "step"
                              and any(x.get(k) not in (None, "") for x in rows)))   # no column that is always empty
    first = [k for k in ("prompt", "completion", "reward") if k in keys]
    rewards = [k for k in keys if k.startswith("reward/")]
    last = [k for k in ("feedback", "has_teacher", "teacher_prompt") if k in keys]
    return first + rewards + last + [k for k in keys if k not in first + rewards + last]


def text_table(rows: Sequence[Mapping], width: int = 36) -> str:
    """The rows as a fixed-width text table (long texts cut to ``width`` characters, newlines as |)."""
    if not rows:
        return "(no completions yet)"
    cols = table_columns(rows)
    widths = {c: width if c in TEXT_COLUMNS else max(len(c), 6) for c in cols}
    lines = ["  ".join(c[:widths[c]].ljust(widths[c]) for c in cols)]
    lines += ["  ".join(_short(r.get(c), widths[c]).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def html_table(rows: Sequence[Mapping], step: int | None = None) -> str:
    """The rows as an HTML table (texts escaped, newlines kept)."""
    if not rows:
        return "<i>no completions yet</i>"
    cols = table_columns(rows)
    cell = "<td style='text-align:left;vertical-align:top;white-space:pre-wrap;max-width:28em'>{}</td>"
    head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(cell.format(html.escape(_short(r.get(c), 400).replace(" | ", "\n")))
                                    for c in cols) + "</tr>" for r in rows)
    caption = f"<caption style='text-align:left'>sampled completions, step {step}</caption>" if step is not None else ""
    return f"<table>{caption}<tr>{head}</tr>{body}</table>"


class Rows(list):
    """The metric rows of a run: a plain list, shown in one line (a notebook prints a cell's last value)."""

    def __repr__(self) -> str:
        if not self:
            return "Rows([])"
        last = self[-1]
        shown = ", ".join(f"{k} {last[k]:.3g}" for k in ("reward/mean", "eval/accuracy") if isinstance(last.get(k), float))
        return f"<{len(self)} metric rows, last step {last.get('step', '?')}{': ' + shown if shown else ''}>"


def _widgets():
    try:
        import ipywidgets
    except ImportError:  # the dashboard still works headless
        return None
    return ipywidgets


class Dashboard:
    """Live plots, progress, completions table and stop button (module docstring).

    Args:
        max_steps: the run's length in sdpo_kit steps (progress and time left); ``train`` fills it
            from the trainer when None.
        panels, title, png_path, every: as ``LivePlot`` (the plot redraws every ``every`` rows: a
            redraw is the slow part, the progress line and the table update on every row).
        table_size: completions shown (the first rows of the step's batch, a few groups).
        table_every: headless, print the text table every this many steps (0: never).
    """

    def __init__(self, max_steps: int | None = None, panels: Sequence = DEFAULT_PANELS, title: str | None = None,
                 png_path: str | os.PathLike | None = None, every: int = 5, table_size: int = 8,
                 table_every: int = 10):
        self.max_steps, self.table_size, self.table_every = max_steps, int(table_size), int(table_every)
        self.plot = LivePlot(panels, title=title, png_path=png_path, every=every)
        self.in_notebook = self.plot.in_notebook
        self.plot.in_notebook = False  # the dashboard shows the PNG in its own image widget
        self.stop_requested = False
        self.stopped_at: int | None = None
        self.step, self.table_rows, self.table_step = 0, [], None
        self._step_times: list[float] = []
        self._thread, self._result, self._error = None, None, None
        self._displayed = False
        w = _widgets()
        self.widget = None
        if w is not None:
            self.progress = w.IntProgress(value=0, min=0, max=max(1, max_steps or 1), description="step")
            self.status = w.HTML(self.status_text())
            self.stop_button = w.Button(description="stop after this step", button_style="danger", icon="stop")
            self.stop_button.on_click(self.request_stop)
            self.image = w.Image(format="png")
            self.table = w.HTML(html_table([]))
            self.widget = w.VBox([w.HBox([self.progress, self.status, self.stop_button]), self.image, self.table])

    # --- what the trainer calls ---------------------------------------------------------
    def request_stop(self, *_) -> None:
        """Ask the trainer to stop after the current step (the stop button's action)."""
        self.stop_requested = True
        if self.widget is not None:
            self.stop_button.disabled = True
            self.stop_button.description = "stopping after this step"

    def __call__(self, row: Mapping) -> None:
        """One metrics row: plot, progress and status."""
        self.plot.update(row)
        self.step = max(self.step, int(row.get("step", 0)))
        if isinstance(row.get("time/step_s"), (int, float)):
            self._step_times.append(float(row["time/step_s"]))
        self._show()

    update = __call__

    def on_completions(self, step: int, rows: Sequence[Mapping]) -> None:
        """A step's sampled completions: the table shows the first ``table_size``."""
        self.table_rows, self.table_step = [dict(r) for r in rows[:self.table_size]], step
        if self.widget is not None:
            self.table.value = html_table(self.table_rows, step)
        if not self.in_notebook and self.table_every and step % self.table_every == 0:
            print(f"sampled completions, step {step}:\n{text_table(self.table_rows)}", flush=True)

    def close(self) -> None:
        """Final draw (plot, PNG, status); a run that ended early on request says after which step."""
        if self.stop_requested and self.stopped_at is None and self.step < (self.max_steps or self.step + 1):
            self.stopped_at = self.step
        self.plot.close()
        if self.widget is not None and self.plot.history:
            self.image.value = self.plot.png()      # close()'s draw, or the last one: never a second
        self._show(final=True)
        if self.in_notebook and headless() and self.plot.history:   # a page without widgets still shows it
            from IPython.display import Image, display

            display(Image(data=self.snapshot(), format="png"))

    def snapshot(self, path: str | os.PathLike | None = None) -> bytes:
        """The dashboard as one PNG, for docs and headless runs: the status line, the plot panels and
        the completions table as text (what the widget shows, without a browser); written to ``path``."""
        import matplotlib.image as mpimg
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        plot = mpimg.imread(io.BytesIO(self.plot.render()), format="png")
        h, w = plot.shape[0] / 100, plot.shape[1] / 100                              # inches at 100 dpi
        caption = f"sampled completions, step {self.table_step}" if self.table_rows else ""
        table = f"{caption}\n{text_table(self.table_rows, width=30)}"
        text_h = 0.22 * (table.count("\n") + 1) + 0.3       # lines at 11 pt: legible when a page scales it down
        fig = Figure(figsize=(w, h + 0.45 + text_h), dpi=100)
        FigureCanvasAgg(fig)
        H = fig.get_figheight()
        ax = fig.add_axes((0, text_h / H, 1, h / H))
        ax.imshow(plot)
        ax.axis("off")
        fig.text(0.01, 1 - 0.12 / H, f"[stop after this step]   {self.status_text(final=True)}", va="top",
                 family="monospace", fontsize=10)
        fig.text(0.01, (text_h - 0.1) / H, table, va="top", family="monospace", fontsize=11)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(buf.getvalue())
        return buf.getvalue()

    # --- progress -----------------------------------------------------------------------
    @property
    def seconds_per_step(self) -> float | None:
        recent = self._step_times[-10:]
        return sum(recent) / len(recent) if recent else None

    def status_text(self, final: bool = False) -> str:
        """``step 12/100 · 0.42 s/step · 0:00:37 left`` (or how the run ended)."""
        total = f"/{self.max_steps}" if self.max_steps else ""
        sps = self.seconds_per_step
        parts = [f"step {self.step}{total}", f"{sps:.2f} s/step" if sps is not None else "? s/step"]
        if self.stopped_at is not None:
            parts.append(f"stopped after step {self.stopped_at}")
        elif final:
            parts.append("done")
        elif self.max_steps and sps is not None:
            parts.append(f"{_clock(sps * max(0, self.max_steps - self.step))} left")
        return " · ".join(parts)

    def _show(self, final: bool = False) -> None:
        if self.widget is None:
            return
        self.progress.max = max(1, self.max_steps or self.step or 1)
        self.progress.value = min(self.step, self.progress.max)
        self.status.value = self.status_text(final)
        if self.in_notebook:
            if self.plot.history and not final and (self.plot.n_draws == 0 or len(self.plot.history) % self.plot.every == 0):
                self.image.value = self.plot.png()  # the PNG the plot just drew for png_path, if it did
            self.show()

    def show(self) -> None:
        """Display the widget once, in a notebook (every later change redraws it in place)."""
        if self.in_notebook and self.widget is not None and not self._displayed:
            from IPython.display import display

            display(self.widget)
            self._displayed = True

    # --- running a trainer --------------------------------------------------------------
    def train(self, trainer, resume_from_checkpoint: str | Path | None = None, background: bool | None = None):
        """Run ``trainer`` (a scratch trainer, or one from sdpo_kit's TRL builders) with this dashboard
        among its callbacks. In a notebook with someone at it (``background`` None) in a thread, so the
        stop button is heard: returns at once, ``wait()`` gives the rows. Elsewhere, and in a notebook
        run headless (matplotlib's non-interactive Agg backend, as CI runs the notebooks: no one can
        press the button), it runs here and returns the rows."""
        listeners = trainer.metrics_callback.sinks if hasattr(trainer, "metrics_callback") else trainer.callbacks
        if not any(cb is self for cb in listeners):
            raise ValueError("build the trainer with this dashboard among its callbacks (callbacks=[dash]): "
                             "it hears the rows and the trainer hears its stop button through them")
        if self.max_steps is None:
            self.max_steps = steps_of(trainer)
        self._show()
        background = (self.in_notebook and not headless()) if background is None else background

        def run():
            try:
                if hasattr(trainer, "metrics_callback"):
                    self._result = train_trl(trainer, resume_from_checkpoint)
                else:
                    self._result = trainer.train(resume_from_checkpoint=resume_from_checkpoint)
            except BaseException as e:  # handed to wait()
                self._error = e
            finally:
                self.close()

        if not background:
            run()
            return self.wait()
        self._thread = threading.Thread(target=run, name="sdpo_kit-training", daemon=True)
        self._thread.start()
        return None

    def wait(self):
        """The rows of the run ``train`` started (waits for a background one); re-raises its error."""
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return Rows(self._result) if isinstance(self._result, list) else self._result


def headless() -> bool:
    """Whether matplotlib draws with no screen to show it on (the Agg backend: ``MPLBACKEND=Agg``)."""
    import matplotlib

    return matplotlib.get_backend().lower() == "agg"


def steps_of(trainer) -> int | None:
    """A trainer's max_steps in sdpo_kit steps: the scratch config's, or TRL's / num_iterations."""
    config = getattr(trainer, "config", None)
    if config is not None and hasattr(config, "max_steps"):
        return int(config.max_steps)
    args, cb = getattr(trainer, "args", None), getattr(trainer, "metrics_callback", None)
    if args is not None and getattr(args, "max_steps", 0) > 0:
        return int(args.max_steps) // (cb.mu if cb is not None else 1)
    return None


class DashboardCallback(TrainerCallback):
    """A ``Dashboard`` on any transformers / TRL trainer: its logs (``metrics_from_trl_logs``) as
    rows, its stop button as ``control.should_training_stop`` plus a checkpoint (``should_save``)
    after the current optimizer step. sdpo_kit's own TRL builders need none: pass the dashboard
    itself as a callback there (it then also gets the completions)."""

    def __init__(self, dashboard: Dashboard | None = None, **dashboard_kwargs):
        self.dashboard = dashboard if dashboard is not None else Dashboard(**dashboard_kwargs)

    def on_train_begin(self, args, state, control, **kwargs):
        if self.dashboard.max_steps is None and state.max_steps > 0:
            self.dashboard.max_steps = int(state.max_steps)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and state.is_world_process_zero and not is_train_summary(logs):
            self.dashboard({k: v for k, v in metrics_from_trl_logs(logs, state.global_step).items()
                            if not SUMMARY_KEY.search(k)})
        self.on_step_end(args, state, control)  # a click during the log: the save and stop follow it

    def on_step_end(self, args, state, control, **kwargs):
        if self.dashboard.stop_requested and state.global_step < state.max_steps:
            control.should_training_stop = True
            control.should_save = True

    def on_train_end(self, args, state, control, **kwargs):
        self.dashboard.close()
