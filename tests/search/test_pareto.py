"""Pareto frontiers and the ranking of configurations: properties (hypothesis) and examples."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from search._pareto import (
    FRONTIERS,
    Frontier,
    best_configuration,
    capacity_kinds,
    ceiling_rival,
    pareto_front,
    rank_configurations,
    refinement_contenders,
)

MAX, MIN = "qps_per_dollar", "ttft_p90"

# few distinct values so that ties and exact duplicates are common
_value = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]),
    st.floats(min_value=0.0, max_value=100.0, allow_nan=False, allow_infinity=False),
)
_maybe_missing = st.one_of(_value, st.just(math.nan))


@st.composite
def frames(draw: st.DrawFn, min_size: int = 0, max_size: int = 30) -> pd.DataFrame:
    n = draw(st.integers(min_value=min_size, max_value=max_size))
    ids = draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n, unique=True))

    def column(elements: st.SearchStrategy) -> list:
        return draw(st.lists(elements, min_size=n, max_size=n))

    return pd.DataFrame(
        {
            "configuration_id": ids,
            "label": column(st.sampled_from(["a", "b", "c"])),
            "num_gpus": column(st.sampled_from([1, 2, 4, 8])),
            MAX: column(_maybe_missing),
            MIN: column(_maybe_missing),
            "slo_passed": column(st.booleans()),
        },
        index=pd.Index(ids, name="row"),
    )


def _finite(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    mask = np.ones(len(frame), dtype=bool)
    for column in columns:
        mask &= np.isfinite(frame[column].to_numpy(dtype=float))
    return frame[mask]


def _points(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return frame[MAX].to_numpy(dtype=float), frame[MIN].to_numpy(dtype=float)


def _weakly_dominates(a: pd.DataFrame, b: pd.DataFrame) -> np.ndarray:
    """[i, j]: row i of ``a`` is at least as good as row j of ``b`` on both columns."""
    (au, ad), (bu, bd) = _points(a), _points(b)
    return (au[:, None] >= bu[None, :]) & (ad[:, None] <= bd[None, :])


def _strictly_dominates(a: pd.DataFrame, b: pd.DataFrame) -> np.ndarray:
    (au, ad), (bu, bd) = _points(a), _points(b)
    better = (au[:, None] > bu[None, :]) | (ad[:, None] < bd[None, :])
    return _weakly_dominates(a, b) & better


def _shuffled(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    return frame.sample(frac=1.0, random_state=seed)


# ------------------------------------------------------------------ pareto_front


@settings(max_examples=100, deadline=None)
@given(frames())
def test_every_row_off_the_front_is_dominated_by_a_front_row(frame: pd.DataFrame) -> None:
    front = pareto_front(frame, MAX, MIN)
    valid = _finite(frame, MAX, MIN)
    off = valid[~valid.index.isin(front)]
    on_front = frame.loc[front]
    # off the front: weakly dominated by a front row ...
    assert _weakly_dominates(on_front, off).any(axis=0).all()
    # ... strictly, unless it is an exact duplicate of the front row kept in its place
    for label in off.index[~_strictly_dominates(on_front, off).any(axis=0)]:
        row = off.loc[label]
        twin = on_front[(on_front[MAX] == row[MAX]) & (on_front[MIN] == row[MIN])]
        assert len(twin) == 1 and twin.index[0] < label  # kept: the smallest index label


@settings(max_examples=100, deadline=None)
@given(frames())
def test_no_front_row_dominates_another_and_front_is_sorted(frame: pd.DataFrame) -> None:
    front = pareto_front(frame, MAX, MIN)
    rows = frame.loc[front]
    assert len(set(front)) == len(front)
    weakly = _weakly_dominates(rows, rows)
    assert not (weakly & ~np.eye(len(rows), dtype=bool)).any()
    # ordered by the minimized column; both columns strictly increase along the front
    assert rows[MIN].is_monotonic_increasing and rows[MIN].is_unique
    assert rows[MAX].is_monotonic_increasing and rows[MAX].is_unique
    assert set(front) <= set(_finite(frame, MAX, MIN).index)


@settings(max_examples=100, deadline=None)
@given(frames(), st.integers(0, 2**31 - 1))
def test_front_is_invariant_under_shuffling(frame: pd.DataFrame, seed: int) -> None:
    assert pareto_front(_shuffled(frame, seed), MAX, MIN) == pareto_front(frame, MAX, MIN)


@settings(max_examples=100, deadline=None)
@given(frames(min_size=1), st.data())
def test_adding_a_dominated_point_does_not_change_the_front(
    frame: pd.DataFrame, data: st.DataObject
) -> None:
    front = pareto_front(frame, MAX, MIN)
    if not front:
        return
    anchor = frame.loc[data.draw(st.sampled_from(front))]
    worse_up = data.draw(st.floats(0.0, 10.0, allow_nan=False))
    worse_down = data.draw(st.floats(0.0, 10.0, allow_nan=False))
    if worse_up == 0.0 and worse_down == 0.0:
        worse_down = 1.0  # strictly dominated, not a duplicate
    new_label = int(frame.index.max()) + 1
    extra = pd.DataFrame(
        {MAX: [anchor[MAX] - worse_up], MIN: [anchor[MIN] + worse_down]},
        index=pd.Index([new_label], name=frame.index.name),
    )
    grown = pd.concat([frame, extra])
    assert pareto_front(grown, MAX, MIN) == front


def test_front_example_ties_nan_and_order() -> None:
    frame = pd.DataFrame(
        {
            MAX: [1.0, 2.0, 3.0, 3.0, 2.0, np.nan, 5.0, 4.0],
            MIN: [1.0, 2.0, 3.0, 3.0, 1.0, 0.1, np.inf, 3.0],
        },
        index=[10, 11, 12, 9, 13, 14, 15, 16],
    )
    # 13 dominates 10 and 11; 16 dominates 12 and 9; 14 (NaN) and 15 (inf) have no result
    assert pareto_front(frame, MAX, MIN) == [13, 16]
    # exact duplicates: the smallest index label is kept, whatever the row order
    dup = pd.DataFrame({MAX: [1.0, 1.0, 1.0], MIN: [2.0, 2.0, 2.0]}, index=["b", "a", "c"])
    assert pareto_front(dup, MAX, MIN) == ["a"]


def test_front_accepts_nullable_dtypes_and_empty_frames() -> None:
    frame = pd.DataFrame(
        {
            MAX: pd.array([1.0, None, 3.0], dtype="Float64"),
            MIN: pd.array([1.0, 0.5, 2.0], dtype="Float64"),
        }
    )
    assert pareto_front(frame, MAX, MIN) == [0, 2]
    assert pareto_front(frame.iloc[:0], MAX, MIN) == []
    with pytest.raises(ValueError, match="no column 'nope'"):
        pareto_front(frame, MAX, "nope")


def test_frontiers() -> None:
    assert [f.name for f in FRONTIERS] == [
        "qps_per_dollar-vs-ttft_p90",
        "qps_per_dollar-vs-tbt_p99",
    ]
    assert all(isinstance(f, Frontier) and f.maximize == "qps_per_dollar" for f in FRONTIERS)
    assert [f.minimize for f in FRONTIERS] == ["ttft_p90", "tbt_p99"]
    with pytest.raises(AttributeError):
        FRONTIERS[0].name = "other"  # type: ignore[misc]


# ------------------------------------------------------------------ ranking


@settings(max_examples=100, deadline=None)
@given(frames(), st.integers(0, 2**31 - 1))
def test_ranking_is_deterministic_under_shuffles(frame: pd.DataFrame, seed: int) -> None:
    ranked = rank_configurations(frame)
    again = rank_configurations(_shuffled(frame, seed))
    assert ranked["configuration_id"].tolist() == again["configuration_id"].tolist()
    assert ranked["rank"].tolist() == list(range(1, len(frame) + 1))
    assert again["rank"].tolist() == list(range(1, len(frame) + 1))


@settings(max_examples=100, deadline=None)
@given(frames())
def test_ranking_order(frame: pd.DataFrame) -> None:
    ranked = rank_configurations(frame)
    assert sorted(ranked.index) == sorted(frame.index)  # same rows, index labels kept
    keys = [
        (
            not row["slo_passed"],
            -row[MAX] if not math.isnan(row[MAX]) else math.inf,
            row["num_gpus"],
            row["label"],
            row["configuration_id"],
        )
        for _, row in ranked.iterrows()
    ]
    assert keys == sorted(keys)


@settings(max_examples=100, deadline=None)
@given(frames())
def test_best_configuration_is_on_the_ttft_front_of_passing_rows(frame: pd.DataFrame) -> None:
    best = best_configuration(frame)
    passing = frame[frame["slo_passed"].astype(bool)]
    candidates = _finite(passing, MAX)
    if candidates.empty:
        assert best is None
        return
    assert best is not None and bool(best["slo_passed"])
    assert best[MAX] == candidates[MAX].max()
    assert best["rank"] == 1
    if not math.isfinite(best[MIN]):
        return
    front = pareto_front(passing, MAX, MIN)
    top = passing.loc[front[-1]]  # the front's highest QPS/$
    assert top[MAX] == best[MAX]
    if (candidates[MAX] == best[MAX]).sum() == 1:
        assert best.name in front
    else:  # a tie on QPS/$ goes to fewer GPUs, not lower latency: on the front or tied with it
        assert best.name in front or top[MIN] <= best[MIN]


def test_best_configuration_examples() -> None:
    frame = pd.DataFrame(
        {
            "configuration_id": [1, 2, 3, 4, 5],
            "label": ["e", "d", "c", "b", "a"],
            "num_gpus": [8, 2, 4, 2, 2],
            MAX: [9.0, 2.0, 2.0, 2.0, 1.0],
            "slo_passed": pd.array([False, True, True, True, None], dtype="boolean"),
        }
    )
    ranked = rank_configurations(frame)
    # passing first; QPS/$ tie -> fewer GPUs -> label; the failing 9.0 and the unknown 1.0 last
    assert ranked["configuration_id"].tolist() == [4, 2, 3, 1, 5]
    best = best_configuration(frame)
    assert best is not None and best["configuration_id"] == 4 and best["rank"] == 1
    assert best_configuration(frame.assign(slo_passed=False)) is None
    assert best_configuration(frame.iloc[:0]) is None
    assert best_configuration(frame.assign(**{MAX: np.nan})) is None
    with pytest.raises(ValueError, match="slo_passed"):
        rank_configurations(frame.drop(columns="slo_passed"))


# --------------------------------------------------------------------------- refinement

FINE = 0.01
BRACKET_COLUMNS = [
    "configuration_id", "capacity_qps", "capacity_upper_qps", "cost_per_hour",
    "qps_per_dollar", "slo_passed", "tolerance", "capacity_kind",
]  # fmt: skip


@st.composite
def brackets(draw: st.DrawFn) -> pd.DataFrame:
    """Results with capacity brackets, costs and the tolerance each was searched at."""
    n = draw(st.integers(min_value=0, max_value=20))
    rows = []
    for i in range(n):
        capacity = draw(st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0]))
        width = draw(st.sampled_from([0.005, 0.01, 0.05, 0.2, math.inf]))
        cost = draw(st.sampled_from([1.0, 2.0, 4.0]))
        rows.append(
            {
                "configuration_id": i,
                "capacity_qps": capacity,
                "capacity_upper_qps": capacity * (1 + width) if math.isfinite(width) else None,
                "cost_per_hour": cost,
                "qps_per_dollar": capacity / cost,
                "slo_passed": draw(st.booleans()) and capacity > 0,
                "tolerance": draw(st.sampled_from([FINE, 0.05, None])),
                # no failing rate: the search rested on the ceiling, or (old rows) unknown
                "capacity_kind": (
                    draw(st.sampled_from(["ceiling", None]))
                    if capacity > 0 and not math.isfinite(width)
                    else draw(st.sampled_from(["measured", None]))
                ),
            }
        )
    return pd.DataFrame(rows, columns=BRACKET_COLUMNS)


def _optimistic(row: pd.Series) -> float:
    upper = row["capacity_upper_qps"]
    return math.inf if upper is None or pd.isna(upper) else upper / row["cost_per_hour"]


@given(brackets())
def test_contenders_are_exactly_the_coarse_passing_rows_that_could_beat_the_best(
    frame: pd.DataFrame,
) -> None:
    contenders = refinement_contenders(frame, FINE)
    measured = frame["capacity_upper_qps"].notna()  # in these frames, exactly the measured
    passing = frame[frame["slo_passed"] & (frame["qps_per_dollar"] > 0) & measured]
    if passing.empty:
        assert contenders == []
        return
    floor = passing["qps_per_dollar"].max()
    expected = {
        int(row["configuration_id"])
        for _, row in passing.iterrows()
        if (pd.isna(row["tolerance"]) or row["tolerance"] > FINE) and _optimistic(row) > floor
    }
    assert set(contenders) == expected and len(contenders) == len(expected)
    optimism = [_optimistic(frame.set_index("configuration_id").loc[c]) for c in contenders]
    assert optimism == sorted(optimism, reverse=True)  # most promising first


@given(brackets())
def test_a_coarse_best_always_contends_and_a_fine_frame_is_settled(frame: pd.DataFrame) -> None:
    best = best_configuration(frame)
    contenders = refinement_contenders(frame, FINE)
    coarse = best is not None and (pd.isna(best["tolerance"]) or best["tolerance"] > FINE)
    if coarse and capacity_kinds(frame).loc[best.name] == "measured":
        assert int(best["configuration_id"]) in contenders
    elif best is not None and capacity_kinds(frame).loc[best.name] == "ceiling":
        assert contenders == []  # no measured row passes: nothing a refinement can settle
    assert refinement_contenders(frame.assign(tolerance=FINE), FINE) == []


def test_contenders_example() -> None:
    frame = pd.DataFrame(
        {
            "configuration_id": [1, 2, 3, 4],
            "capacity_qps": [10.0, 9.8, 9.0, 12.0],
            "capacity_upper_qps": [10.5, 10.3, 9.4, 12.6],
            "cost_per_hour": [1.0, 1.0, 1.0, 1.0],
            "qps_per_dollar": [10.0, 9.8, 9.0, 12.0],
            "slo_passed": [True, True, True, False],  # 4 fails its filters: out
            "tolerance": [0.05, 0.05, 0.05, 0.05],
        }
    )
    # 2 could still beat 1 (10.3 > 10); 3 cannot (9.4 < 10)
    assert refinement_contenders(frame, FINE) == [1, 2]
    refined = frame.assign(tolerance=[FINE, 0.05, 0.05, 0.05])
    assert refinement_contenders(refined, FINE) == [2]


# --------------------------------------------------------------------------- capacity kinds


def _kinds_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "configuration_id": [1, 2, 3, 4],
            "label": ["measured", "ceiling", "measured, worse", "old ceiling"],
            "num_gpus": [4, 16, 4, 8],
            "capacity_qps": [10.0, 25.0, 8.0, 30.0],
            "capacity_upper_qps": [10.5, None, 8.4, None],
            "cost_per_hour": [1.0, 1.0, 1.0, 1.0],
            "qps_per_dollar": [10.0, 25.0, 8.0, 30.0],
            "slo_passed": [True, True, True, False],
            "tolerance": [0.05, 0.05, 0.05, 0.05],
            "capacity_kind": ["measured", "ceiling", "measured", None],
        }
    )


def test_capacity_kinds_infers_old_rows_and_defaults_to_measured() -> None:
    frame = _kinds_frame()
    assert capacity_kinds(frame).tolist() == ["measured", "ceiling", "measured", "ceiling"]
    assert set(capacity_kinds(frame.drop(columns="capacity_kind"))) == {"measured"}


def test_a_measured_configuration_is_recommended_over_a_ceiling_one() -> None:
    frame = _kinds_frame()
    best = best_configuration(frame)
    assert best is not None and best["configuration_id"] == 1
    # passing measured first, then passing ceiling, then failing
    assert rank_configurations(frame)["configuration_id"].tolist() == [1, 3, 2, 4]
    rival = ceiling_rival(frame)  # a higher QPS/$ resting on the ceiling: named, not chosen
    assert rival is not None and rival["configuration_id"] == 2
    # ceiling rows never contend for refinement; the floor is the measured best
    assert refinement_contenders(frame, FINE) == [1]


def test_a_ceiling_configuration_is_recommended_only_when_none_measured_passes() -> None:
    frame = _kinds_frame().assign(slo_passed=[False, True, False, False])
    best = best_configuration(frame)
    assert best is not None and best["capacity_kind"] == "ceiling"
    assert ceiling_rival(frame) is None  # the best itself says it rests on the ceiling
    assert refinement_contenders(frame, FINE) == []


def test_no_rival_when_the_measured_best_is_ahead() -> None:
    frame = _kinds_frame().assign(qps_per_dollar=[10.0, 9.0, 8.0, 30.0])
    assert best_configuration(frame)["configuration_id"] == 1
    assert ceiling_rival(frame) is None
