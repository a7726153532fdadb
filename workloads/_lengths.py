"""Token-length distributions for prompts and outputs.

Each distribution answers `sample(n, rng)`: `n` lengths as int64, every one inside the
distribution's [low, high] bounds (low >= 1), drawn from `rng`.  `parse_length_spec` reads the
compact string form used by the CLI and by `WorkloadSpec.prompt_len` / `output_len`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workloads._errors import WorkloadError

LENGTH_SPEC_FORMS = (
    "N or fixed:N, uniform:LOW:HIGH, zipf:THETA:LOW:HIGH, lognormal:MEDIAN:SIGMA[:MAX], "
    "trace:PATH[:prompt|output]"
)


_FORMS = {
    "fixed": "fixed:N",
    "uniform": "uniform:LOW:HIGH",
    "zipf": "zipf:THETA:LOW:HIGH",
    "lognormal": "lognormal:MEDIAN:SIGMA[:MAX]",
}


def _check_int(name: str, value: object, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise WorkloadError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_float(name: str, value: object, *, allow_zero: bool = False) -> None:
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    if not ok or not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise WorkloadError(f"{name} must be a finite number {bound}, got {value!r}")


class LengthDistribution(ABC):
    """A distribution of token counts (prompt or output lengths), bounded to [low, high]."""

    @abstractmethod
    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """`n` lengths as an int64 array, each in the distribution's bounds, drawn from `rng`."""


@dataclass(frozen=True, slots=True)
class Fixed(LengthDistribution):
    """Every request has `value` tokens."""

    value: int

    def __post_init__(self) -> None:
        _check_int("fixed: value", self.value)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, self.value, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Uniform(LengthDistribution):
    """Integers uniform on [low, high], both included."""

    low: int
    high: int

    def __post_init__(self) -> None:
        _check_int("uniform: low", self.low)
        _check_int("uniform: high", self.high)
        if self.low > self.high:
            raise WorkloadError(f"uniform: low must be <= high, got {self.low} > {self.high}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(self.low, self.high, size=n, endpoint=True, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Zipf(LengthDistribution):
    """Bounded Zipf over [low, high] (Vidur's `ZipfRequestLengthGenerator`, unscrambled).

    Length `low + k - 1` has probability proportional to `1 / k**theta` for rank k = 1..(high -
    low + 1): short lengths are the most frequent and `theta` sets how fast the tail falls off.
    Any theta > 0 is allowed (theta = 1 included); sampling is an inverse-CDF lookup.
    """

    theta: float
    low: int
    high: int

    def __post_init__(self) -> None:
        _check_float("zipf: theta", self.theta)
        _check_int("zipf: low", self.low)
        _check_int("zipf: high", self.high)
        if self.low > self.high:
            raise WorkloadError(f"zipf: low must be <= high, got {self.low} > {self.high}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        ranks = np.arange(1, self.high - self.low + 2, dtype=np.float64)
        cdf = np.cumsum(ranks ** -float(self.theta))
        idx = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
        return self.low + np.minimum(idx, len(cdf) - 1).astype(np.int64)


@dataclass(frozen=True, slots=True)
class LogNormal(LengthDistribution):
    """Log-normal lengths parameterised by the **median** (exp(mu)) and `sigma` (of the log).

    Draws are rounded to integers and clipped to [low, high] (high None: no upper clip), so
    the mean of the samples is about `median * exp(sigma**2 / 2)` when the clip rarely bites.
    """

    median: float
    sigma: float
    low: int = 1
    high: int | None = None

    def __post_init__(self) -> None:
        _check_float("lognormal: median", self.median)
        _check_float("lognormal: sigma", self.sigma, allow_zero=True)
        _check_int("lognormal: low", self.low)
        if self.high is not None:
            _check_int("lognormal: max", self.high)
            if self.low > self.high:
                raise WorkloadError(f"lognormal: max must be >= {self.low}, got {self.high}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        draws = np.rint(self.median * np.exp(self.sigma * rng.standard_normal(n)))
        hi = np.inf if self.high is None else self.high
        return np.clip(draws, self.low, hi).astype(np.int64)


@dataclass(frozen=True, slots=True)
class Empirical(LengthDistribution):
    """Lengths drawn with replacement from observed `values` (for example a trace's prompts)."""

    values: np.ndarray = field(repr=False)
    source: str = ""  # where the values came from, for messages and metadata

    def __post_init__(self) -> None:
        values = np.asarray(self.values)
        if values.ndim != 1 or len(values) == 0:
            raise WorkloadError("empirical: values must be a non-empty 1-d array")
        if not np.issubdtype(values.dtype, np.number) or np.any(values < 1):
            raise WorkloadError("empirical: every value must be a number >= 1")
        object.__setattr__(self, "values", values.astype(np.int64))

    @classmethod
    def from_trace(cls, path: str | Path, which: str = "prompt") -> Empirical:
        """The prompt or output lengths of a trace file (any format `load_trace` sniffs)."""
        from workloads._traces import read_trace

        if which not in ("prompt", "output"):
            raise WorkloadError(f"which must be 'prompt' or 'output', got {which!r}")
        trace = read_trace(path)
        values = trace.prompt_tokens if which == "prompt" else trace.output_tokens
        return cls(values=values, source=f"{path}:{which}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.values[rng.integers(0, len(self.values), size=n)]


def _number(part: str, kind: type) -> int | float:
    try:
        return kind(part)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise WorkloadError(f"{part!r} is not {what}") from None


def _parse(text: str, which: str, *, load: bool) -> LengthDistribution | None:
    """Parse a length spec; with load=False a trace spec is only checked, not read."""
    if text.strip().isdecimal():  # a bare count: every request that long
        return Fixed(int(text))
    kind, _, rest = text.strip().partition(":")
    kind = kind.lower()
    if kind == "trace":
        path, column = rest, which
        head, sep, tail = rest.rpartition(":")
        if sep and tail in ("prompt", "output"):
            path, column = head, tail
        if not path:
            raise WorkloadError("the trace path is empty")
        if not Path(path).is_file():
            raise WorkloadError(f"no trace file at {path!r}")
        return Empirical.from_trace(path, column) if load else None
    parts = rest.split(":") if rest else []
    shapes: dict[str, tuple[type, ...]] = {
        "fixed": (int,),
        "uniform": (int, int),
        "zipf": (float, int, int),
        "lognormal": (float, float, int),
    }
    if kind not in shapes:
        raise WorkloadError(f"unknown kind {kind!r}")
    types = shapes[kind]
    n_min = 2 if kind == "lognormal" else len(types)
    if not n_min <= len(parts) <= len(types):
        raise WorkloadError(f"{kind} has the form {_FORMS[kind]}, got {len(parts)} value(s)")
    args = [_number(p, t) for p, t in zip(parts, types, strict=False)]
    if kind == "fixed":
        return Fixed(*args)
    if kind == "uniform":
        return Uniform(*args)
    if kind == "zipf":
        return Zipf(*args)
    return LogNormal(args[0], args[1], high=args[2] if len(args) == 3 else None)


def parse_length_spec(text: str, *, which: str = "prompt") -> LengthDistribution:
    """Read a compact length spec: `512` or `fixed:512`, `uniform:100:2000`, `zipf:1.1:16:4096`,
    `lognormal:MEDIAN:SIGMA[:MAX]` (median, not mean) or `trace:PATH[:prompt|output]`.

    `which` is the trace column used when a `trace:` spec names none.
    """
    try:
        dist = _parse(text, which, load=True)
    except WorkloadError as exc:
        raise WorkloadError(
            f"bad length spec {text!r}: {exc}; allowed forms: {LENGTH_SPEC_FORMS}"
        ) from None
    assert dist is not None
    return dist


def check_length_spec(text: str) -> None:
    """Raise `WorkloadError` if `text` is not a valid length spec, without reading any trace."""
    try:
        _parse(text, "prompt", load=False)
    except WorkloadError as exc:
        raise WorkloadError(
            f"bad length spec {text!r}: {exc}; allowed forms: {LENGTH_SPEC_FORMS}"
        ) from None
