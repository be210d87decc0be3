"""Runs agents' programs in the sandbox, with a cache.

K candidates of one prompt often write the same program, and a deterministic program on the same
inputs prints the same thing, so results are cached by source text. Programs that read clocks or
random numbers would be cached too: tool programs are expected to be deterministic.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from teamrl.sandbox import Sandbox


class ProgramRunner:
    """`run(sources) -> [(stdout, ran_ok)]`, executing each distinct source once in the sandbox."""

    def __init__(
        self, cpu_time_s: float = 2.0, workers: int = 2, cache_size: int = 50_000, wall_time_s: float | None = None
    ) -> None:
        """cpu_time_s: CPU seconds per program, the limit that decides (load does not change
        whether a program stays under it); wall_time_s: the wall-clock backstop for programs that
        wait, None: the sandbox's generous default (SandboxLimits)."""
        self.cpu_time_s = cpu_time_s
        self.wall_time_s = wall_time_s
        self.workers = workers
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[str, bool]] = OrderedDict()
        self._sandbox: Sandbox | None = None  # started on first use, so idle workflows cost nothing

    def run(self, sources: list[str]) -> list[tuple[str, bool]]:
        for source in sources:
            if source not in self._cache and not _encodable(source):
                self._cache[source] = ("", False)  # e.g. lone surrogates: no valid program text
        missing = list(dict.fromkeys(s for s in sources if s not in self._cache))
        if missing:
            if self._sandbox is None:
                from teamrl.sandbox import Sandbox, SandboxLimits

                limits = SandboxLimits(wall_time_s=self.wall_time_s, cpu_time_s=self.cpu_time_s)
                self._sandbox = Sandbox(limits, workers=self.workers)
            for source, result in zip(missing, self._sandbox.run_many(missing)):
                self._cache[source] = (result.stdout, result.status == "ok")
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return [self._cache[s] for s in sources]

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


def _encodable(source: str) -> bool:
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
