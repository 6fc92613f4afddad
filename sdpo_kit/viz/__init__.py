"""What you watch: the training dashboard, the live plots it draws and the notebooks' explorers.

    plots.py      ``Panel`` (one subplot: metric keys against the step), ``DEFAULT_PANELS``, ``LivePlot``
                  (redraws in place in Jupyter, writes a PNG headless) and its TrainerCallback
    dashboard.py  the training dashboard (ipywidgets): plots, progress, a completions table, a stop button
    explorers.py  the explorers: sliders -> a figure in Jupyter, the default figure headless

Each algorithm declares the panels it adds (its package's ``algorithm.py``); ``sdpo_kit.train`` draws the
default ones plus those. Nothing here knows an algorithm.
"""

from sdpo_kit.core.lazy import lazy_exports

EXPORTS = {
    "Panel": "sdpo_kit.viz.plots:Panel",
    "DEFAULT_PANELS": "sdpo_kit.viz.plots:DEFAULT_PANELS",
    "LivePlot": "sdpo_kit.viz.plots:LivePlot",
    "Dashboard": "sdpo_kit.viz.dashboard:Dashboard",
    "text_table": "sdpo_kit.viz.dashboard:text_table",
    "explore": "sdpo_kit.viz.explorers:explore",
    "figure_png": "sdpo_kit.viz.explorers:figure_png",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
