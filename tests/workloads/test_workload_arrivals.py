from __future__ import annotations

import numpy as np
import pytest

from workloads import Gamma, Poisson, Static, WorkloadError, mean_rate, rescale_to_rate


def test_poisson_mean_rate_over_20k_draws() -> None:
    t = Poisson(qps=7.5).times(20_000, np.random.default_rng(1))
    assert t.dtype == np.float64 and len(t) == 20_000
    assert np.all(np.diff(t) >= 0) and t[0] > 0
    assert mean_rate(t) == pytest.approx(7.5, rel=0.03)
    gaps = np.diff(t)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("cv", [0.25, 1.0, 3.0])
def test_gamma_mean_rate_and_cv(cv: float) -> None:
    t = Gamma(qps=4.0, cv=cv).times(50_000, np.random.default_rng(2))
    gaps = np.diff(np.concatenate([[0.0], t]))
    assert np.all(gaps >= 0)
    assert 1 / gaps.mean() == pytest.approx(4.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.07)


def test_static_all_zero() -> None:
    t = Static().times(100, np.random.default_rng(0))
    assert t.dtype == np.float64 and np.all(t == 0)


def test_same_seed_same_times() -> None:
    a = Gamma(3.0, 2.0).times(1000, np.random.default_rng(42))
    b = Gamma(3.0, 2.0).times(1000, np.random.default_rng(42))
    c = Gamma(3.0, 2.0).times(1000, np.random.default_rng(43))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Poisson(0),
        lambda: Poisson(-1.0),
        lambda: Poisson(float("inf")),
        lambda: Gamma(1.0, 0),
        lambda: Gamma(0.0, 1.0),
    ],
)
def test_bad_parameters(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(WorkloadError, match=r"(qps|cv) must be"):
        make()


@pytest.mark.parametrize("n", [0, -3])
def test_bad_n(n: int) -> None:
    with pytest.raises(WorkloadError, match="number of requests"):
        Poisson(1.0).times(n, np.random.default_rng(0))


def test_rescale_to_rate() -> None:
    t = np.array([5.0, 6.0, 8.0, 11.0])
    r = rescale_to_rate(t, 2.0)
    assert r[0] == 0 and mean_rate(r) == pytest.approx(2.0)
    assert np.allclose(np.diff(r), np.diff(t) / 4.0)  # rate 3/6 = 0.5 -> 2
    assert mean_rate(np.zeros(5)) is None
    with pytest.raises(WorkloadError, match="same instant"):
        rescale_to_rate(np.zeros(5), 1.0)
