"""Traces read without pandas (workloads/_plain_columns.py) parse to exactly what pandas
reads, on the shared traces and on files with every kind of cell; a file the plain reader
does not handle goes to pandas, with the same result or the same error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workloads import WorkloadError, _traces, read_trace
from workloads import _plain_columns as plain

TRACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"  # ../shared


def _with_pandas(monkeypatch: pytest.MonkeyPatch, path: Path, **kwargs):
    """`read_trace` through pandas alone."""
    with monkeypatch.context() as m:
        m.setattr(plain, "csv_header", lambda path: None)
        m.setattr(plain, "csv_columns", lambda path, header, names: None)
        m.setattr(plain, "json_numbers", lambda values: None)
        return read_trace(path, **kwargs)


def _read_both(monkeypatch: pytest.MonkeyPatch, path: Path, **kwargs):
    """(plain result, pandas result, whether the plain reader needed pandas); a WorkloadError
    message in place of a result."""
    calls = []
    frame = _traces._pandas_frame

    def counted(*args):
        calls.append(args)
        return frame(*args)

    def read(reader):
        try:
            return reader()
        except WorkloadError as exc:
            return str(exc)

    monkeypatch.setattr(_traces, "_pandas_frame", counted)
    first = read(lambda: read_trace(path, **kwargs))
    used_pandas = bool(calls)
    second = read(lambda: _with_pandas(monkeypatch, path, **kwargs))
    assert len(calls) > int(used_pandas) or isinstance(second, str)  # that one used pandas
    return first, second, used_pandas


def _same(a, b) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    assert (a.format, a.dropped_invalid, len(a)) == (b.format, b.dropped_invalid, len(b))
    for name in ("prompt_tokens", "output_tokens", "arrival_times"):
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            assert x is None and y is None, name
            continue
        assert x.dtype == y.dtype and np.array_equal(x, y), name  # bit for bit
    if a.prefix_blocks is not None or b.prefix_blocks is not None:
        assert a.prefix_blocks.tolist() == b.prefix_blocks.tolist()


@pytest.mark.skipif(not TRACES.is_dir(), reason="shared traces not present")
@pytest.mark.parametrize(
    "name",
    [
        "azure_llm_2023_conv.csv",
        "azure_llm_2023_code.csv",
        "vidur_splitwise_conv.csv",
        "vidur_splitwise_code.csv",
        "vidur_arxiv_summarization_4k.csv",
        "mooncake_conversation.jsonl",
        "mooncake_synthetic.jsonl",
    ],
)
def test_shared_traces_parse_identically_without_pandas(monkeypatch, name):
    mine, theirs, used_pandas = _read_both(monkeypatch, TRACES / name)
    assert not used_pandas
    _same(mine, theirs)


# (file text, read_trace arguments, whether the plain reader handles it)
CSV_CASES = {
    "azure_7_digit_fractions": (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:46,5,0\n2024-02-29T00:00:00.5,7,3\n",
        {},
        True,
    ),
    "azure_empty_and_negative_cells": (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:50.1,,109\n"
        ",3,4\n2023-11-16 18:15:51,-3,4\n2023-11-16 18:15:52,+8,2\n",
        {},
        True,
    ),
    "vidur_floats_exponents_quotes_crlf_blank_lines": (
        'arrived_at,num_prefill_tokens,num_decode_tokens\r\n0.0,"12",3\r\n\r\n'
        "4.314579,7,1\r\n1e-3,9,9\r\n.5,1,1\r\n2.,3,3\r\n12.000000000000000001,5,5\r\n",
        {"format": "vidur"},
        True,
    ),
    "vidur_lengths_only_with_other_columns": (
        "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"
        "3772,54,3826,69.85185185185185\n2015,156,2171,oops\n",
        {},
        True,
    ),
    "csv_float_token_counts": (
        "p,o,t\n3.7,2.2,1\n4,5,2\n",
        {"columns": {"prompt": "p", "output": "o", "arrival": "t"}, "time_unit": "ms"},
        True,
    ),
    "csv_all_empty_arrivals": (
        "p,o,t\n3,2,\n4,5,\n",
        {"columns": {"prompt": "p", "output": "o", "arrival": "t"}},
        True,
    ),
    # what the plain reader leaves to pandas
    "na_words": ("p,o\nNA,2\n4,nan\n5,5\n", {"columns": {"prompt": "p", "output": "o"}}, False),
    "spaces": ("p,o\n 3,2\n4 ,5\n", {"columns": {"prompt": "p", "output": "o"}}, False),
    # pandas names the columns (the mark stripped, a repeated name renamed), in place
    "byte_order_mark": ("\ufeffp,o\n3,2\n", {"columns": {"prompt": "p", "output": "o"}}, True),
    "repeated_names": ("p,o,p\n3,2,1\n", {"columns": {"prompt": "p", "output": "o"}}, True),
    "short_row": ("p,o,x\n3,2\n4,5,1\n", {"columns": {"prompt": "p", "output": "o"}}, False),
    "implicit_index": ("p,o\n0,3,2\n1,4,5\n", {"columns": {"prompt": "p", "output": "o"}}, False),
    "date_only": (
        "when,p,o\n2024-01-01,5,5\n2024-01-01 00:00:02,6,6\n",
        {"columns": {"arrival": "when", "prompt": "p", "output": "o"}},
        False,
    ),
    "time_zones": (
        "when,p,o\n2024-01-01 00:00:03+01:00,5,5\n2024-01-01 00:00:02+01:00,6,6\n",
        {"columns": {"arrival": "when", "prompt": "p", "output": "o"}},
        False,
    ),
    "mixed_time_zones": (
        "when,p,o\n2024-01-01 00:00:03+01:00,5,5\n2024-01-01 00:00:02Z,6,6\n",
        {"columns": {"arrival": "when", "prompt": "p", "output": "o"}},
        False,
    ),
    "leap_second_and_bad_day": (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2016-12-31 23:59:60,5,5\n"
        "2023-02-30 00:00:00,6,6\n2023-02-01 00:00:00,7,7\n",
        {},
        False,
    ),
    "numbers_and_stamps_mixed": (
        "when,p,o\n5,5,5\n2024-01-01 00:00:02,6,6\n",
        {"columns": {"arrival": "when", "prompt": "p", "output": "o"}},
        False,
    ),
    "integer_of_19_digits": (
        "p,o\n1234567890123456789,2\n3,4\n",
        {"columns": {"prompt": "p", "output": "o"}},
        True,
    ),
    "no_valid_row": ("p,o\n0,2\n", {"columns": {"prompt": "p", "output": "o"}}, True),
    "header_only": ("p,o\n", {"columns": {"prompt": "p", "output": "o"}}, True),
}


@pytest.mark.parametrize("case", list(CSV_CASES))
def test_csv_cells_parse_as_pandas_reads_them(monkeypatch, tmp_path, case):
    text, kwargs, handled = CSV_CASES[case]
    path = tmp_path / "trace.csv"
    path.write_bytes(text.encode())
    mine, theirs, used_pandas = _read_both(monkeypatch, path, **kwargs)
    _same(mine, theirs)
    if not isinstance(mine, str):
        assert used_pandas != handled, "plain reader" if handled else "pandas"


def test_a_known_case_reads_what_it_should(monkeypatch, tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(CSV_CASES["azure_7_digit_fractions"][0])
    trace = read_trace(path)
    assert trace.dropped_invalid == 1  # the zero output
    assert trace.prompt_tokens.tolist() == [374, 396, 7]  # by arrival
    a = trace.arrival_times
    assert a[0] == 0.0 and a[1] == 4314579000 * 1e-9  # 100 ns resolution kept
    assert a[2] == pytest.approx(105 * 86400 - (18 * 3600 + 15 * 60 + 46.68059) + 0.5)


MOONCAKE_CASES = {
    "ints_floats_nulls": (
        '{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [1, 2]}\n'
        '{"timestamp": 27.5, "input_length": 6.0, "output_length": null, "hash_ids": []}\n'
        '\n{"timestamp": 10, "input_length": 7, "output_length": 3, "hash_ids": [1]}\n',
        True,
    ),
    "strings_and_booleans": (
        '{"timestamp": "0", "input_length": 5, "output_length": true}\n'
        '{"timestamp": "12", "input_length": "6", "output_length": 3}\n',
        False,
    ),
    "null_timestamps": (
        '{"timestamp": null, "input_length": 5, "output_length": 2}\n',
        True,
    ),
}


@pytest.mark.parametrize("case", list(MOONCAKE_CASES))
def test_mooncake_values_parse_as_pandas_reads_them(monkeypatch, tmp_path, case):
    text, handled = MOONCAKE_CASES[case]
    path = tmp_path / "trace.jsonl"
    path.write_text(text)
    mine, theirs, used_pandas = _read_both(monkeypatch, path)
    _same(mine, theirs)
    if not isinstance(mine, str):
        assert used_pandas != handled
