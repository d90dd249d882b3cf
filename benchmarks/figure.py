"""One benchmark figure: a median beside its baseline measured in the same run, and the ratio.
Every suite returns these; `benchmarks.run` renders them into BENCHMARKS.md."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    unit: str
    target: str
    met: bool | None
    baseline_name: str = ""
    baseline_value: float | None = None

    @property
    def ratio(self) -> float | None:
        if not self.baseline_value:
            return None
        return self.value / self.baseline_value
