"""LivePlot (headless PNG, history, throttling, one notebook display handle), the TRL log-name
mapping and LivePlotCallback, checked against TRL 1.16's GRPOTrainer."""

import math
from types import SimpleNamespace

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import pytest
from transformers import TrainerControl, TrainerState

from sdpo_kit.viz import plots as plotting
from sdpo_kit.viz.plots import (
    DEFAULT_PANELS,
    LivePlot,
    LivePlotCallback,
    Panel,
    is_train_summary,
    metrics_from_trl_logs,
)


def fake_rows(n, start=1, eval_every=5):
    """``n`` scratch-loop-like metric rows: steps start.., eval/accuracy every eval_every steps."""
    rows = []
    for step in range(start, start + n):
        row = {"step": step, "reward/mean": 0.2 + 0.02 * step, "reward/std": 0.1, "loss": 1.0 / step,
               "loss/kl": 0.01 * step, "stats/clip_frac": 0.05, "completion/mean_length": 4.0 + step % 3,
               "reward/exact_match": 0.2 + 0.02 * step, "time/step_s": 0.5}
        if step % eval_every == 0:
            row["eval/accuracy"] = 0.3 + 0.01 * step
        rows.append(row)
    return rows


def assert_nonblank_png(path):
    img = mpimg.imread(path)  # (H, W, 4) floats in [0, 1]
    assert img.ndim == 3 and img.shape[0] >= 200 and img.shape[1] >= 200, img.shape
    ink = (img[..., :3] < 0.9).any(axis=-1)  # (H, W): pixels that are not (near) white
    assert 0.01 < ink.mean() < 0.6, f"{ink.mean():.4f} of the image is drawn: blank or solid"
    return img


@pytest.fixture(autouse=True)
def no_pyplot_figures():
    """Every test: LivePlot never leaves a figure open in pyplot's state."""
    assert plt.get_fignums() == []
    yield
    assert plt.get_fignums() == [], "LivePlot leaked a pyplot figure"


@pytest.fixture
def no_display(monkeypatch):
    """IPython.display.display fails the test if anything calls it."""
    import IPython.display

    def boom(*args, **kwargs):
        raise AssertionError("display() called outside a notebook")

    monkeypatch.setattr(IPython.display, "display", boom)


def test_headless_update_writes_a_nonblank_png(tmp_path, no_display):
    """With no kernel, updates write png_path (a real, non-blank image with all six panels'
    space) and never call IPython's display."""
    assert plotting._in_notebook() is False  # pytest is not a Jupyter kernel
    path = tmp_path / "sub" / "live.png"
    plot = LivePlot(png_path=path, title="test run")
    for row in fake_rows(3):
        plot.update(row)
    assert plot.n_draws == 3
    assert path.exists() and path.stat().st_size > 10_000
    img = assert_nonblank_png(path)
    assert img.shape[1] > img.shape[0]  # 3 columns x 2 rows: wider than tall
    assert not list(path.parent.glob("*.tmp")), "the atomic write left its temporary file"


def test_history_keeps_every_metric_and_numbers_missing_steps(tmp_path):
    """history holds a copy of every dict, plotted or not (reward/<name>, time/step_s); a dict
    without ``step`` gets previous step + 1 (0 first); series() skips None / NaN / inf."""
    plot = LivePlot(png_path=tmp_path / "p.png", every=100)
    rows = fake_rows(4)
    for row in rows:
        plot(row)  # the callback interface
    rows[0]["loss"] = -1.0  # a copy was stored: mutating the caller's dict changes nothing
    assert plot.history[0]["loss"] == 1.0
    assert [set(h) for h in plot.history] == [set(r) for r in rows]
    assert plot.history[3]["reward/exact_match"] == pytest.approx(0.28)

    bare = LivePlot()
    for value in (1.0, None, math.nan, math.inf, 0.5):
        bare.update({"loss": value, "note": "text"})
    assert [h["step"] for h in bare.history] == [0, 1, 2, 3, 4]
    assert bare.series("loss") == ([0.0, 4.0], [1.0, 0.5])
    assert bare.series("note") == ([], [])  # text is kept in history but not plotted


def test_missing_panels_show_no_data_yet_instead_of_failing(tmp_path):
    """Only ``loss`` logged: five default panels say "no data yet", the loss panel has one
    line, and the PNG is still written."""
    plot = LivePlot(png_path=tmp_path / "p.png")
    plot.update({"step": 1, "loss": 0.7})
    plot.update({"step": 2, "loss": 0.5})
    assert len(plot._axes) == len(DEFAULT_PANELS) == 6
    texts = [[t.get_text() for t in ax.texts] for ax in plot._axes]
    assert texts == [["no data yet"], [], ["no data yet"], ["no data yet"], ["no data yet"], ["no data yet"]]
    loss_ax = plot._axes[1]
    assert len(loss_ax.lines) == 1 and list(loss_ax.lines[0].get_ydata()) == [0.7, 0.5]
    assert all(ax.get_xlabel() == "step" for ax in plot._axes)
    assert (tmp_path / "p.png").exists()


def test_reward_band_and_eval_markers_are_drawn(tmp_path):
    """The reward panel draws mean +- std as a filled band around its line; eval accuracy
    (sparse) is drawn with markers at exactly the steps it was logged."""
    plot = LivePlot(png_path=tmp_path / "p.png", every=100)
    for row in fake_rows(10):
        plot.update(row)
    plot.close()
    reward_ax, eval_ax = plot._axes[0], plot._axes[5]
    (band,) = reward_ax.collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(0.22 - 0.1) and ys.max() == pytest.approx(0.40 + 0.1)
    (line,) = eval_ax.lines
    assert line.get_marker() == "o" and list(line.get_xdata()) == [5.0, 10.0]


def test_every_throttles_draws_and_close_flushes(tmp_path):
    """every=4: 10 updates render twice (after updates 4 and 8); close() renders the last two
    once; a second close() renders nothing; save() re-renders only when there is news."""
    plot = LivePlot(png_path=tmp_path / "p.png", every=4)
    for i, row in enumerate(fake_rows(10), start=1):
        plot.update(row)
        assert plot.n_draws == i // 4
    plot.close()
    assert plot.n_draws == 3
    plot.close()
    assert plot.n_draws == 3
    other = plot.save(tmp_path / "copy.png")
    assert plot.n_draws == 3 and other.read_bytes() == (tmp_path / "p.png").read_bytes()
    plot.update(fake_rows(1, start=11)[0])
    plot.save(other)
    assert plot.n_draws == 4


def test_headless_without_png_path_renders_nothing_until_save(tmp_path, no_display):
    """No kernel and no png_path: updates cost no rendering; save(path) still draws them all."""
    plot = LivePlot(every=1)
    for row in fake_rows(5):
        plot.update(row)
    assert plot.n_draws == 0
    plot.close()
    assert plot.n_draws == 0
    with pytest.raises(ValueError, match="needs a path"):
        plot.save()
    out = plot.save(tmp_path / "late.png")
    assert plot.n_draws == 1
    assert_nonblank_png(out)


def test_custom_panels_and_bad_arguments(tmp_path):
    """Panels may be keys or tuples of keys (legend when several); every < 1, no panels and a
    non-key panel fail with clear errors."""
    plot = LivePlot(panels=["reward/exact_match", ("reward/a", "reward/b"), Panel("t", "loss")],
                    png_path=tmp_path / "p.png", max_cols=2)
    plot.update({"step": 1, "reward/a": 1.0, "reward/b": 2.0, "loss": 3.0})
    assert len(plot._axes) == 3 and len(plot._fig.axes) == 4  # 2 x 2 grid, the 4th hidden
    assert not plot._fig.axes[3].get_visible()
    assert len(plot._axes[1].lines) == 2 and plot._axes[1].get_legend() is not None
    assert plot._axes[0].texts[0].get_text() == "no data yet"
    with pytest.raises(ValueError, match="every"):
        LivePlot(every=0)
    with pytest.raises(ValueError, match="at least one panel"):
        LivePlot(panels=[])
    with pytest.raises(TypeError, match="panel"):
        LivePlot(panels=[3])


class FakeHandle:
    def __init__(self):
        self.updates = []

    def update(self, obj):
        self.updates.append(obj)


def test_notebook_redraws_on_one_display_handle(tmp_path, monkeypatch):
    """In a (simulated) kernel: the first draw makes ONE display handle with display_id=True,
    every later draw calls handle.update with a PNG image; png_path is still written."""
    import IPython.display

    calls = []

    def fake_display(obj, **kwargs):
        calls.append((obj, kwargs))
        return FakeHandle()

    monkeypatch.setattr(plotting, "_in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display", fake_display)
    plot = LivePlot(png_path=tmp_path / "p.png", every=2)
    assert plot.in_notebook
    for row in fake_rows(9):
        plot.update(row)
    plot.close()
    assert len(calls) == 1 and calls[0][1] == {"display_id": True}
    handle = plot._handle
    assert len(handle.updates) == plot.n_draws - 1 == 4  # draws after 2, 4, 6, 8 and at close
    for image in [calls[0][0], *handle.updates]:
        assert isinstance(image, IPython.display.Image) and image.data[:8] == b"\x89PNG\r\n\x1a\n"
    assert handle.updates[-1].data == (tmp_path / "p.png").read_bytes()


# a log dict exactly as TRL 1.16 GRPOTrainer passes it to on_log (captured from a 2-step run
# on the tiny lab with beta=0.04; names from grpo_trainer.py's self._metrics[mode][...] and log())
TRL_LOG = {
    "loss": -0.0233, "grad_norm": 2.398, "learning_rate": 1e-06, "num_tokens": 443.0,
    "completions/mean_length": 2.6875, "completions/min_length": 2.0, "completions/max_length": 4.0,
    "completions/clipped_ratio": 0.0, "completions/mean_terminated_length": 2.6875,
    "completions/min_terminated_length": 2.0, "completions/max_terminated_length": 4.0,
    "rewards/exact_match/mean": 0.1875, "rewards/exact_match/std": 0.4031, "reward": 0.1875,
    "reward_std": 0.4031, "frac_reward_zero_std": 0.25, "kl": 0.002, "entropy": 1.0215,
    "clip_ratio/low_mean": 0.01, "clip_ratio/high_mean": 0.02, "clip_ratio/region_mean": 0.03,
    "clip_ratio/low_min": 0.0, "clip_ratio/high_max": 0.05, "step_time": 0.0685, "epoch": 0.0042,
}
TRL_SUMMARY = {"train_runtime": 0.1305, "train_samples_per_second": 245.282,
               "train_steps_per_second": 15.33, "total_flos": 0.0, "train_loss": -0.0116,
               "epoch": 0.0083}


def test_metrics_from_trl_logs_maps_trl_names_to_sdpo_names():
    """Every TRL 1.16 GRPO log key maps to the scratch loop's name (values untouched),
    ``step`` is the given global step, and no TRL-only name is left over."""
    m = metrics_from_trl_logs(TRL_LOG, step=7)
    assert m == {
        "step": 7, "loss": -0.0233, "stats/grad_norm": 2.398, "stats/learning_rate": 1e-06,
        "num_tokens": 443.0, "completion/mean_length": 2.6875, "completion/min_length": 2.0,
        "completion/max_length": 4.0, "completion/clipped_ratio": 0.0,
        "completion/mean_terminated_length": 2.6875, "completion/min_terminated_length": 2.0,
        "completion/max_terminated_length": 4.0, "reward/exact_match": 0.1875,
        "reward/exact_match/std": 0.4031, "reward/mean": 0.1875, "reward/std": 0.4031,
        "stats/frac_zero_std": 0.25, "loss/kl": 0.002, "stats/entropy": 1.0215,
        "stats/clip_frac_low": 0.01, "stats/clip_frac_high": 0.02, "stats/clip_frac": 0.03,
        "stats/clip_frac_low_min": 0.0, "stats/clip_frac_high_max": 0.05, "time/step_s": 0.0685,
        "epoch": 0.0042,
    }
    assert "reward" not in m and not any(k.startswith(("completions/", "clip_ratio/", "rewards/")) for k in m)


def test_metrics_from_trl_logs_eval_prefix_passthrough_and_none():
    """TRL eval-mode keys (``eval_<key>``) become ``eval/<mapped>``; eval/accuracy and unknown
    keys pass through; a None value (TRL's all-NaN metric) is kept; ``step`` wins over a
    ``step`` in the logs; the input dict is not modified."""
    logs = {"eval_reward": 0.5, "eval_loss": 0.1, "eval/accuracy": 0.4, "my/metric": 3,
            "policy_loss": None, "step": 99, "rewards/org/model/mean": 0.2}
    before = dict(logs)
    m = metrics_from_trl_logs(logs, step=5)
    assert m == {"eval/reward/mean": 0.5, "eval/loss": 0.1, "eval/accuracy": 0.4, "my/metric": 3,
                 "loss/policy": None, "step": 5, "reward/org/model": 0.2}
    assert logs == before


def test_is_train_summary():
    """The end-of-training summary is recognised; a training log (or one that mixes the two)
    is not."""
    assert is_train_summary(TRL_SUMMARY)
    assert is_train_summary({"epoch": 1.0, "train_mem_cpu_alloc_delta": 5})
    assert not is_train_summary(TRL_LOG)
    assert not is_train_summary({**TRL_SUMMARY, "reward": 0.3})


def test_callback_on_log_updates_plot_and_on_train_end_writes_png(tmp_path):
    """on_log maps TRL's logs (at state.global_step) into the plot's history, skips the pure
    train summary, drops speed keys from a mixed log; on_train_end writes png_path."""
    path = tmp_path / "cb.png"
    cb = LivePlotCallback(png_path=path, every=100)
    args, control = SimpleNamespace(output_dir=str(tmp_path / "out")), TrainerControl()
    for step in (1, 2):
        cb.on_log(args, TrainerState(global_step=step), control, logs=dict(TRL_LOG))
    cb.on_log(args, TrainerState(global_step=2), control, logs=dict(TRL_SUMMARY))
    cb.on_log(args, TrainerState(global_step=3), control,
              logs={"reward": 0.5, "train_runtime": 1.0, "train_tokens_per_second": 9.0})
    cb.on_log(args, TrainerState(global_step=3, is_world_process_zero=False), control, logs=dict(TRL_LOG))
    assert [h["step"] for h in cb.plot.history] == [1, 2, 3]
    assert cb.plot.history[0] == metrics_from_trl_logs(TRL_LOG, 1)
    assert cb.plot.history[2] == {"reward/mean": 0.5, "step": 3}
    assert not path.exists()  # every=100: nothing drawn yet
    cb.on_train_end(args, TrainerState(global_step=3), control)
    assert_nonblank_png(path)
    assert not (tmp_path / "out").exists()
    with pytest.raises(TypeError, match="not both"):
        LivePlotCallback(LivePlot(), every=2)


def test_callback_headless_without_png_path_writes_to_output_dir(tmp_path):
    """Headless with no png_path, on_train_end still leaves the PNG: output_dir/live_plot.png."""
    cb = LivePlotCallback()
    args = SimpleNamespace(output_dir=str(tmp_path / "run"))
    cb.on_log(args, TrainerState(global_step=1), TrainerControl(), logs=dict(TRL_LOG))
    assert cb.plot.n_draws == 0
    cb.on_train_end(args, TrainerState(global_step=1), TrainerControl())
    assert_nonblank_png(tmp_path / "run" / "live_plot.png")


def test_callback_on_a_real_trl_grpo_trainer(tmp_path):
    """Two steps of TRL 1.16's GRPOTrainer on the (untrained) tiny lab with the callback: one
    history row per step, all under sdpo_kit names, the summary skipped, the PNG written."""
    import datasets
    import torch
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from sdpo_kit.lab.model import build_model, build_tokenizer
    from sdpo_kit.rewards import exact_match_reward
    from sdpo_kit.tasks import ArithmeticTask

    torch.manual_seed(0)
    tok = build_tokenizer()
    build_model(tok).save_pretrained(tmp_path / "tiny")  # beta > 0: TRL reloads the reference from disk
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "tiny")
    train, _ = ArithmeticTask(n_eval=8).splits()
    cb = LivePlotCallback(png_path=tmp_path / "trl.png")
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, fp16=False, report_to=[],
        max_steps=2, per_device_train_batch_size=8, num_generations=4, max_completion_length=4,
        logging_steps=1, beta=0.04, save_strategy="no", disable_tqdm=True, dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[exact_match_reward()], args=config,
                          train_dataset=datasets.Dataset.from_list(train[:32]),
                          processing_class=tok, callbacks=[cb])
    trainer.train()
    rows = cb.plot.history
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert {"reward/mean", "reward/std", "reward/exact_match", "loss", "loss/kl", "stats/clip_frac",
                "completion/mean_length", "stats/frac_zero_std", "time/step_s"} <= set(r)
        assert not {"reward", "reward_std", "kl", "clip_ratio/region_mean", "completions/mean_length",
                    "train_runtime", "total_flos"} & set(r)
    assert_nonblank_png(tmp_path / "trl.png")


def test_liveplot_as_a_scratch_grpo_loop_callback(tmp_path):
    """``GRPOScratchTrainer(callbacks=[plot])`` feeds the plot every row the loop logs, in order."""
    import torch

    from sdpo_kit.grpo.config import GRPOScratchConfig
    from sdpo_kit.grpo.loop import GRPOScratchTrainer
    from sdpo_kit.lab.model import build_model, build_tokenizer
    from sdpo_kit.rewards import exact_match_reward
    from sdpo_kit.tasks import ArithmeticTask

    torch.manual_seed(0)
    tok = build_tokenizer()
    model = build_model(tok)
    train, _ = ArithmeticTask(n_eval=4).splits()
    plot = LivePlot(png_path=tmp_path / "loop.png")
    cfg = GRPOScratchConfig(max_steps=2, prompts_per_step=2, num_generations=2, max_completion_length=3)
    loop = GRPOScratchTrainer(model, tok, [exact_match_reward()], train, cfg, eval_fn=lambda m: 0.25,
                    callbacks=[plot])
    history = loop.train()
    assert plot.history == history and [r["step"] for r in history] == [0, 1, 2]
    assert plot.n_draws == 3
    assert plot.series("eval/accuracy") == ([0.0, 2.0], [0.25, 0.25])
    assert_nonblank_png(tmp_path / "loop.png")


def test_callback_replaying_a_trl_runs_log_history_gives_its_metrics_rows(tmp_path):
    """LivePlotCallback fed a finished TRL run's ``state.log_history`` (what any TRL trainer keeps) plots,
    step by step, the reward/mean that the builder's MetricsCallback wrote to metrics.jsonl (mu = 1)."""
    import datasets

    from sdpo_kit.core.metrics import read_jsonl
    from sdpo_kit.grpo.trl import build_trl_grpo_trainer
    from sdpo_kit.lab.model import build_model, build_tokenizer
    from sdpo_kit.tasks import ArithmeticTask

    def char_reward(prompts, completions, **kwargs):   # varied, so the series is not all zeros
        return [sum(map(ord, c[0]["content"])) % 7 / 7 for c in completions]

    tok = build_tokenizer()
    train, _ = ArithmeticTask(n_eval=8).splits()
    trainer = build_trl_grpo_trainer(build_model(tok, seed=0), tok, [char_reward], datasets.Dataset.from_list(train[:32]),
                                     preset="cpu", output_dir=tmp_path, verbose=False, max_steps=3, prompts_per_step=2,
                                     num_generations=4, max_completion_length=3, seed=0)
    trainer.train()
    replay = LivePlotCallback(LivePlot(every=10**9))
    for logs in trainer.state.log_history:
        state = SimpleNamespace(global_step=logs["step"], is_world_process_zero=True)
        replay.on_log(trainer.args, state, None, logs=logs)
    rows = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2, 3] and len({r["reward/mean"] for r in rows}) > 1
    assert replay.plot.series("reward/mean") == ([1.0, 2.0, 3.0], [r["reward/mean"] for r in rows])
