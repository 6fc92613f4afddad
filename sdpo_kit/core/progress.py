"""Progress you can see on long work: a tqdm bar on a terminal, plain lines elsewhere (a log file, CI, a
notebook's captured output), as transformers and TRL show theirs.

    bar = Progress(total, "eval", unit="question")    bar.update(n, **postfix); bar.close()

Left out on purpose: notebooks' live plots (``viz.dashboard``), which show a run's progress there.
"""

from __future__ import annotations

import sys


def on_terminal(stream=None) -> bool:
    stream = sys.stderr if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


class Progress:
    """``total`` units of work named ``desc``: a tqdm bar on a terminal; else a line per ``update`` at most
    every ``every`` units (and at the end), so a log shows the work moving without a line per unit."""

    def __init__(self, total: int, desc: str, unit: str = "it", every: int = 1, terminal: bool | None = None):
        self.total, self.desc, self.unit, self.every, self.done, self._shown = total, desc, unit, max(1, every), 0, 0
        self.bar = None
        if on_terminal() if terminal is None else terminal:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, leave=False)

    def update(self, n: int = 1, **postfix) -> None:
        self.done += n
        if self.bar is not None:
            if postfix:
                self.bar.set_postfix(postfix, refresh=False)
            self.bar.update(n)
        elif self.done - self._shown >= self.every or self.done >= self.total:
            self._shown = self.done
            extra = "".join(f"  {k} {v}" for k, v in postfix.items())
            print(f"{self.desc}: {self.done}/{self.total} {self.unit}s{extra}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
