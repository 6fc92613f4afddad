"""The training dashboard on the tiny lab, driven as a user would: its stop button clicked (the
widget's own ``click()``) ends a run after the current step with a checkpoint that resumes, on both
backends; its table holds the latest sampled completions; headless it writes the PNG and prints a text
table with no widget error; in a (stand-in) kernel it displays one widget and redraws it in place;
and a run's numbers are the same with the dashboard and a tracker on."""

from __future__ import annotations

import pytest
from test_trackers import BEFORE, unchanged_run

from sdpo_kit.grpo.config import GRPOScratchConfig
from sdpo_kit.grpo.loop import GRPOScratchTrainer
from sdpo_kit.grpo.trl import build_trl_grpo_trainer
from sdpo_kit.lab.model import build_model, build_tokenizer
from sdpo_kit.sdpo.config import SDPOScratchConfig
from sdpo_kit.sdpo.loop import SDPOScratchTrainer
from sdpo_kit.tasks import ArithmeticTask
from sdpo_kit.viz import dashboard as dashboard_module
from sdpo_kit.viz import plots as plotting
from sdpo_kit.viz.dashboard import Dashboard, DashboardCallback, html_table, text_table

FP32 = {"rel": 1e-5, "abs": 1e-6}
KW = dict(prompts_per_step=2, num_generations=4, max_completion_length=3, learning_rate=3e-3, seed=1)


def char_reward(prompts, completions, **kwargs):
    return [sum(map(ord, c[0]["content"])) % 7 / 7 for c in completions]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def rows():
    return ArithmeticTask(n_eval=8, seed=0).splits()[0]


def click_at(dash, step):
    """A callback that clicks the dashboard's stop button once the row of ``step`` is logged."""
    def cb(row):
        if row.get("step") == step and "loss" in row:
            dash.stop_button.click()
    return cb


def train_rows(history):
    return [r for r in history if "loss" in r]


def test_stop_button_scratch_checkpoint_resumes(tok, rows, tmp_path):
    """Stop clicked during step 2 of 5: the run ends after step 2 with checkpoint-2; the table shows
    the step's completions; resumed from checkpoint-2 the run logs steps 3-5 as the run that was
    never stopped (fp32 tolerance)."""
    dash = Dashboard(table_size=4)
    cfg = GRPOScratchConfig(max_steps=5, output_dir=str(tmp_path / "a"), **KW)
    loop = GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, cfg, callbacks=[dash, click_at(dash, 2)])
    history = dash.train(loop)
    assert [r["step"] for r in train_rows(history)] == [1, 2]
    assert loop.stopped_at == 2 and dash.stopped_at == 2 and (tmp_path / "a" / "checkpoint-2").is_dir()
    assert dash.progress.value == 2 and dash.progress.max == 5 and "stopped after step 2" in dash.status.value
    assert dash.stop_button.disabled and dash.image.value[:4] == b"\x89PNG"
    assert len(dash.table_rows) == 4 and dash.table_step == 2
    assert {"prompt", "completion", "reward", "reward/char_reward"} <= set(dash.table_rows[0])
    assert all(r["completion"].replace("<", "&lt;").replace(">", "&gt;") in dash.table.value for r in dash.table_rows
               if "&" not in r["completion"])

    resumed = GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows,
                       GRPOScratchConfig(max_steps=5, output_dir=str(tmp_path / "b"), **KW))
    straight = GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, GRPOScratchConfig(max_steps=5, **KW))
    got = train_rows(resumed.train(resume_from_checkpoint=tmp_path / "a" / "checkpoint-2"))
    want = train_rows(straight.train())
    assert [r["step"] for r in got] == [1, 2, 3, 4, 5]
    for g, w in zip(got[2:], want[2:]):
        assert (g["loss"], g["reward/mean"]) == pytest.approx((w["loss"], w["reward/mean"]), **FP32)


def test_stop_button_trl_checkpoint_resumes(tok, rows, tmp_path):
    """The same dashboard on the TRL backend: stop clicked during step 1 of 3 ends the run after it,
    with TRL's checkpoint-1 holding the rows; train() from it finishes steps 2 and 3."""
    def build(out, dash=None):
        extra = [dash, click_at(dash, 1)] if dash else []
        return build_trl_grpo_trainer(build_model(tok, seed=0), tok, [char_reward], rows, preset="cpu",
                                      output_dir=out, verbose=False, max_steps=3, callbacks=extra, **KW)

    dash = Dashboard(table_size=3)
    history = dash.train(build(tmp_path, dash))
    assert [r["step"] for r in train_rows(history)] == [1] and (tmp_path / "checkpoint-1").is_dir()
    assert dash.stopped_at == 1 and dash.max_steps == 3 and len(dash.table_rows) == 3
    resumed = Dashboard()
    trainer = build(tmp_path, None)
    trainer.metrics_callback.sinks.append(resumed)  # as if built with callbacks=[resumed]
    rows_after = resumed.train(trainer, resume_from_checkpoint=tmp_path / "checkpoint-1")
    assert [r["step"] for r in train_rows(rows_after)] == [1, 2, 3] and resumed.stopped_at is None


def test_sdpo_table_and_text_fallback(tok, rows, tmp_path, capsys, monkeypatch):
    """Headless with ipywidgets missing: no widget, no error; the PNG is written and the text table,
    printed every table_every steps, carries SDPO's teacher columns."""
    monkeypatch.setattr(dashboard_module, "_widgets", lambda: None)
    dash = Dashboard(png_path=tmp_path / "dash.png", table_every=2)
    cfg = SDPOScratchConfig(max_steps=2, success_reward_threshold=0.5, **{**KW, "max_completion_length": 4})
    dash.train(SDPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, cfg, callbacks=[dash]))
    out = capsys.readouterr().out
    assert dash.widget is None and (tmp_path / "dash.png").read_bytes()[:4] == b"\x89PNG"
    assert "sampled completions, step 2" in out and "has_teacher" in out and "teacher_prompt" in out
    assert "has_teacher" in html_table(dash.table_rows) and text_table([]) == "(no completions yet)"
    assert dash.snapshot(tmp_path / "snap.png")[:4] == b"\x89PNG" and (tmp_path / "snap.png").stat().st_size > 0


@pytest.mark.parametrize("headless", [False, True], ids=["live", "headless"])
def test_in_a_kernel_one_widget_redrawn_in_place(tok, rows, monkeypatch, headless):
    """In a (stand-in) kernel: display() is called once with the widget box; the image widget's PNG
    changes as rows arrive; the plot does not display a picture of its own. A kernel run headless (the
    executed copies on the docs site, CI) also gets the final snapshot as a plain PNG image at the end,
    which a page without widgets shows; train() returns the rows, shown in one line."""
    import IPython.display

    shown = []
    monkeypatch.setattr(plotting, "_in_notebook", lambda: True)
    monkeypatch.setattr(dashboard_module, "headless", lambda: headless)
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    dash = Dashboard(every=1)
    pngs = []
    loop = GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, GRPOScratchConfig(max_steps=3, **KW),
                    callbacks=[dash, lambda r: pngs.append(dash.image.value)])
    history = dash.train(loop, background=False)
    assert shown[0] is dash.widget and dash.plot.in_notebook is False
    assert len(set(pngs)) == 3 and "done" in dash.status.value
    if headless:
        assert len(shown) == 2 and isinstance(shown[1], IPython.display.Image) and shown[1].data[:4] == b"\x89PNG"
    else:
        assert shown == [dash.widget]
    assert len(history) == 3 and repr(history).startswith("<3 metric rows, last step 3") and "\n" not in repr(history)


@pytest.mark.parametrize("png", [True, False], ids=["png_path", "no_png_path"])
def test_in_a_kernel_each_refresh_draws_once(tmp_path, monkeypatch, png):
    """In a (stand-in) kernel, with or without png_path, every=2: the first row draws (the widget has a
    picture at once), then each 2nd row draws once, for png_path and the image widget together; close()
    with nothing new draws nothing, and with a row not shown yet draws once. Draws are counted at
    matplotlib's savefig; at the end the image widget (and the PNG file) shows every row."""
    from matplotlib.figure import Figure

    monkeypatch.setattr(plotting, "_in_notebook", lambda: True)
    monkeypatch.setattr(dashboard_module, "headless", lambda: False)   # live: no closing snapshot among the draws counted
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: None)
    saves = []
    savefig = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **kw: (saves.append(1), savefig(fig, *a, **kw))[1])
    path = tmp_path / "dash.png"
    dash = Dashboard(png_path=path if png else None, every=2)
    rows = [{"step": i, "loss": 1.0 / i, "reward/mean": 0.1 * i} for i in range(1, 8)]
    for n, row in enumerate(rows[:6], start=1):
        dash(row)
        assert len(saves) == 1 + n // 2, f"after row {n}"
        if png and n % 2 == 0:
            assert path.read_bytes() == dash.image.value       # the file and the widget show the one draw
    dash.close()
    assert len(saves) == 4, "close() with every row shown draws nothing"
    dash.plot.update(rows[6])
    dash.close()
    assert len(saves) == 5, "close() with a row not shown yet draws once"
    assert dash.image.value == dash.plot.render()              # the widget shows every row
    if png:
        assert path.read_bytes() == dash.image.value


def test_background_thread_stops_on_click(tok, rows, tmp_path):
    """As in Jupyter: train() in a thread returns at once; a click from the caller's thread stops the
    run after the step in progress, with its checkpoint; wait() gives the rows."""
    dash = Dashboard()
    loop = GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows,
                    GRPOScratchConfig(max_steps=200, output_dir=str(tmp_path), **KW), callbacks=[dash])
    assert dash.train(loop, background=True) is None
    dash.stop_button.click()
    history = dash.wait()
    last = train_rows(history)[-1]["step"] if train_rows(history) else 0
    assert last < 200 and loop.stopped_at == last and (tmp_path / f"checkpoint-{last}").is_dir()


def test_a_dashboard_not_among_the_callbacks_is_refused(tok, rows):
    """A dashboard the trainer does not call would neither update nor stop it: said at once."""
    loop = GRPOScratchTrainer(build_model(tok, seed=0), tok, [char_reward], rows, GRPOScratchConfig(max_steps=1, **KW))
    with pytest.raises(ValueError, match="callbacks"):
        Dashboard().train(loop)


def test_numbers_are_unchanged_with_the_dashboard_and_a_tracker_on(tok, tmp_path):
    """The dashboard, completions.jsonl and TensorBoard only read: the pinned run's numbers stand."""
    pytest.importorskip("tensorboard")
    dash = Dashboard()
    got = unchanged_run(tok, output_dir=str(tmp_path), log_completions_every=1, report_to="tensorboard",
                        callbacks=[dash])
    for g, b in zip(got, BEFORE, strict=True):
        assert g == pytest.approx(b, **FP32)
    assert dash.table_rows


def test_dashboard_callback_on_a_trainer_sdpo_kit_did_not_wire(tok, rows, tmp_path):
    """DashboardCallback, for a trainer that only takes TrainerCallbacks: TRL's logs feed the plot
    and progress (TRL's step), a click ends training after the optimizer step with a checkpoint."""
    dash = Dashboard()

    class Click(DashboardCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.global_step == 1:
                dash.stop_button.click()
            super().on_log(args, state, control, logs=logs, **kwargs)

    trainer = build_trl_grpo_trainer(build_model(tok, seed=0), tok, [char_reward], rows, preset="cpu",
                                     output_dir=tmp_path, verbose=False, max_steps=3, callbacks=[Click(dash)],
                                     **KW)
    trainer.train()
    assert trainer.state.global_step == 1 and (tmp_path / "checkpoint-1").is_dir()
    assert dash.max_steps == 3 and dash.plot.series("reward/mean")[0] == [1.0] and dash.stopped_at == 1


def test_a_headless_notebook_run_trains_in_the_foreground(monkeypatch):
    """In a kernel run headless (the Agg backend, as CI runs notebooks) no one can press stop: train()
    runs the trainer before it returns, with no thread; with a screen it would start one."""
    from sdpo_kit.viz import dashboard as dash_mod

    calls = []

    class Trainer:
        callbacks = []

        def train(self, resume_from_checkpoint=None):
            calls.append("trained")
            return [{"step": 1}]

    dash = dash_mod.Dashboard(every=10**9)
    dash.in_notebook = True
    t = Trainer()
    t.callbacks = [dash]
    monkeypatch.setattr(dash_mod, "headless", lambda: True)
    assert dash.train(t) == [{"step": 1}] and calls == ["trained"] and dash._thread is None
