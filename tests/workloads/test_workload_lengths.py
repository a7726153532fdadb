from __future__ import annotations

import numpy as np
import pytest

from workloads import (
    Empirical,
    Fixed,
    LogNormal,
    Uniform,
    WorkloadError,
    Zipf,
    parse_length_spec,
)

N = 50_000


def rng() -> np.random.Generator:
    return np.random.default_rng(123)


def test_fixed() -> None:
    x = Fixed(512).sample(10, rng())
    assert x.dtype == np.int64 and np.all(x == 512)


def test_uniform_bounds_and_mean() -> None:
    x = Uniform(100, 2000).sample(N, rng())
    assert x.dtype == np.int64
    assert x.min() == 100 and x.max() == 2000  # both ends reachable
    assert x.mean() == pytest.approx(1050, rel=0.01)


def test_zipf_bounded_and_matches_pmf() -> None:
    dist = Zipf(1.1, 16, 4096)
    x = dist.sample(N, rng())
    assert x.dtype == np.int64 and x.min() >= 16 and x.max() <= 4096
    ranks = np.arange(1, 4096 - 16 + 2)
    pmf = ranks**-1.1 / np.sum(ranks**-1.1)
    assert np.mean(x == 16) == pytest.approx(pmf[0], abs=0.01)  # the mode is the low bound
    assert x.mean() == pytest.approx(np.sum(pmf * (16 + ranks - 1)), rel=0.05)


def test_zipf_theta_one_and_single_value() -> None:
    assert Zipf(1.0, 1, 100).sample(1000, rng()).max() <= 100
    assert np.all(Zipf(2.0, 7, 7).sample(100, rng()) == 7)


def test_lognormal_median_mean_and_clip() -> None:
    x = LogNormal(1000, 0.5).sample(N, rng())
    assert x.dtype == np.int64 and x.min() >= 1
    assert np.median(x) == pytest.approx(1000, rel=0.02)
    assert x.mean() == pytest.approx(1000 * np.exp(0.5**2 / 2), rel=0.02)
    y = LogNormal(1000, 1.5, low=10, high=3000).sample(N, rng())
    assert y.min() >= 10 and y.max() == 3000


def test_empirical_draws_from_values() -> None:
    values = np.array([3, 10, 10, 500])
    x = Empirical(values).sample(N, rng())
    assert set(np.unique(x)) <= {3, 10, 500}
    assert x.mean() == pytest.approx(values.mean(), rel=0.05)
    with pytest.raises(WorkloadError, match=">= 1"):
        Empirical(np.array([1, 0]))
    with pytest.raises(WorkloadError, match="non-empty"):
        Empirical(np.array([], dtype=np.int64))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("fixed:512", Fixed(512)),
        ("uniform:100:2000", Uniform(100, 2000)),
        ("zipf:1.1:16:4096", Zipf(1.1, 16, 4096)),
        ("lognormal:1000:0.8", LogNormal(1000.0, 0.8)),
        ("lognormal:1000:0.8:8192", LogNormal(1000.0, 0.8, high=8192)),
        (" Fixed:7 ", Fixed(7)),
    ],
)
def test_parse_good_forms(text: str, expected: object) -> None:
    assert parse_length_spec(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "unknown kind"),
        ("gauss:1:2", "unknown kind 'gauss'"),
        ("fixed", "fixed has the form fixed:N, got 0 value(s)"),
        ("fixed:0", "must be an integer >= 1"),
        ("fixed:abc", "'abc' is not an integer"),
        ("fixed:1.5", "'1.5' is not an integer"),
        ("uniform:1", "form uniform:LOW:HIGH, got 1 value"),
        ("uniform:500:100", "low must be <= high"),
        ("zipf:0:1:10", "theta must be"),
        ("zipf:1.1:16", "form zipf:THETA:LOW:HIGH"),
        ("lognormal:100", "form lognormal:MEDIAN:SIGMA[:MAX], got 1"),
        ("lognormal:100:-1", "sigma must be"),
        ("lognormal:nan:1", "median must be"),
        ("lognormal:100:1:0", "max must be"),
        ("trace:/no/such/file.csv", "no trace file"),
        ("trace:", "trace path is empty"),
    ],
)
def test_parse_bad_forms(text: str, problem: str) -> None:
    with pytest.raises(WorkloadError) as info:
        parse_length_spec(text)
    message = str(info.value)
    assert repr(text) in message and problem in message
    assert "allowed forms: N or fixed:N, uniform:LOW:HIGH" in message


def test_parse_trace_spec(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n100,5\n200,7\n")
    prompt = parse_length_spec(f"trace:{path}")
    output = parse_length_spec(f"trace:{path}:output")
    assert isinstance(prompt, Empirical) and sorted(prompt.values) == [100, 200]
    assert isinstance(output, Empirical) and sorted(output.values) == [5, 7]
    assert list(parse_length_spec(f"trace:{path}", which="output").values) == [5, 7]


def test_a_bare_count_is_a_fixed_length() -> None:
    assert parse_length_spec("1024") == Fixed(1024)
    assert parse_length_spec(" 8 ") == Fixed(8)
    with pytest.raises(WorkloadError, match=r"bad length spec '0': fixed: value must be .* >= 1"):
        parse_length_spec("0")
    with pytest.raises(WorkloadError, match=r"unknown kind '-5'; allowed forms: N or fixed:N"):
        parse_length_spec("-5")
