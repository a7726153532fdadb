"""The GPU catalog: built-in data, lookups, user overrides and error messages."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from rich.console import Console

from sku_catalog import (
    Catalog,
    CatalogError,
    GpuSku,
    LinkKind,
    NodeShape,
    UnknownSkuError,
    format_sku_table,
    load_catalog,
)

REQUIRED_IDS = (
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "l40s",
    "a10g",
    "l4",
    "b200",
    "b300",
    "gb200",
    "a40",
)

MI300X = """
gpus:
  mi300x:
    name: MI300X
    architecture: cdna3
    memory_gb: 192
    memory_bandwidth_tbps: 5.3
    fp16_tflops: 1307
    fp8_tflops: 2615
    power_w: 750
    nodes:
      - gpus_per_node: 8
        intra_node_link: nvswitch
        intra_node_bandwidth_gbps: 448
        inter_node_bandwidth_gbps: 50
    price_per_gpu_hour: 4.5
    price_source: "some cloud, on-demand"
    price_date: 2025-10-01
"""


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def write(tmp_path: Path, text: str, name: str = "user.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- built-ins


def test_builtins_have_the_required_ids(catalog: Catalog) -> None:
    assert set(REQUIRED_IDS) <= set(catalog.ids())
    assert len(catalog) == len(catalog.ids()) == len(list(catalog))
    assert all(isinstance(sku, GpuSku) for sku in catalog.skus())
    assert all(sku_id == sku_id.lower() for sku_id in catalog)


@pytest.mark.parametrize(
    ("sku_id", "memory_gb", "bf16", "fp8", "arch"),
    # memory as the driver reports it (spec sheets round: 80 GiB = 85.9 GB)
    [
        ("a100-40gb", 42.9, 312, None, "ampere"),
        ("a100-80gb", 85.9, 312, None, "ampere"),
        ("h100-sxm", 85.5, 989, 1979, "hopper"),
        ("h100-pcie", 85.5, 756, 1513, "hopper"),
        ("h200", 150.8, 989, 1979, "hopper"),
        ("l40s", 48.3, 362, 733, "ada"),
        ("l4", 24.2, 121, 242, "ada"),
        ("a10g", 24.1, 70, None, "ampere"),
        ("a40", 48.3, 150, None, "ampere"),
        ("b300", 288.4, 2250, 4500, "blackwell"),
        ("gb200", 198.7, 2500, 5000, "blackwell"),
    ],
)
def test_builtin_spec_values(
    catalog: Catalog, sku_id: str, memory_gb: float, bf16: float, fp8: float | None, arch: str
) -> None:
    sku = catalog.get(sku_id)
    assert sku.memory_gb == memory_gb
    assert sku.fp16_tflops == bf16
    assert sku.fp8_tflops == fp8
    assert sku.architecture == arch


def test_b200_is_the_biggest(catalog: Catalog) -> None:
    b200 = catalog.get("b200")
    assert b200.architecture == "blackwell"
    assert 180 <= b200.memory_gb <= 195
    assert b200.fp16_tflops > catalog.get("h200").fp16_tflops
    assert b200.memory_bandwidth_tbps == pytest.approx(8.0, rel=0.05)


def test_blackwell_generations(catalog: Catalog) -> None:
    """B300 (Blackwell Ultra) adds memory and FP4 over B200, same 16-bit and FP8 peaks; the
    GB200 superchip's GPU runs at a higher power and clock than the HGX B200."""
    b200, b300, gb200 = (catalog.get(s) for s in ("b200", "b300", "gb200"))
    assert b300.memory_gb / b200.memory_gb == pytest.approx(1.5, rel=0.01)
    assert (b300.fp16_tflops, b300.fp8_tflops) == (b200.fp16_tflops, b200.fp8_tflops)
    assert b300.fp4_tflops == pytest.approx(13_125) and b300.peak_flops(fp4=True) > 1.4 * (
        b200.peak_flops(fp4=True)
    )
    assert gb200.peak_flops() / b200.peak_flops() == pytest.approx(2500 / 2250)
    assert gb200.peak_flops(fp4=True) == 2 * gb200.peak_flops(fp8=True) == 1e16
    for sku in (b300, gb200):
        assert sku.memory_bandwidth_tbps == 8.0 and sku.power_w > b200.power_w


def test_gb200_node_is_the_nvl72_nvlink_domain(catalog: Catalog) -> None:
    """TP, EP and attention DP run over NVLink inside a node: an NVL72 rack is one."""
    (node,) = catalog.get("gb200").nodes
    assert node.gpus_per_node == 72
    assert node.intra_node_link is LinkKind.NVSWITCH
    assert node.intra_node_bandwidth_gbps == 900  # NVLink 5, each way
    assert node.inter_node_bandwidth_gbps == 50  # one 400 Gb/s NIC a GPU between racks
    b300 = catalog.get("b300").default_node
    assert (b300.gpus_per_node, b300.intra_node_bandwidth_gbps) == (8, 900)
    assert b300.inter_node_bandwidth_gbps == 100  # ConnectX-8, 800 Gb/s a GPU


def test_builtin_values_are_sane(catalog: Catalog) -> None:
    for sku in catalog.skus():
        assert sku.price_per_gpu_hour > 0, sku.id
        assert sku.price_source.strip(), sku.id
        date = dt.date.fromisoformat(sku.price_date)
        assert dt.date(2024, 1, 1) <= date <= dt.date(2026, 12, 31), sku.id
        assert sku.power_w > 0
        assert 0.1 < sku.memory_bandwidth_tbps < 20
        assert sku.nodes, sku.id
        if sku.fp8_tflops is not None:
            assert sku.fp8_tflops > sku.fp16_tflops, sku.id
        for shape in sku.nodes:
            assert isinstance(shape, NodeShape)
            assert isinstance(shape.intra_node_link, LinkKind)
            assert shape.gpus_per_node >= 1
            assert shape.intra_node_bandwidth_gbps > 0
            assert shape.inter_node_bandwidth_gbps > 0


def test_node_shapes(catalog: Catalog) -> None:
    for sku_id, bw in [("a100-80gb", 300), ("h100-sxm", 450), ("h200", 450), ("b200", 900)]:
        node = catalog.get(sku_id).default_node
        assert node.gpus_per_node == 8
        assert node.intra_node_link is LinkKind.NVSWITCH
        assert node.intra_node_bandwidth_gbps == bw
    assert catalog.get("a40").default_node.intra_node_link is LinkKind.NVLINK_PAIRWISE
    for sku_id in ("l40s", "l4", "a10g", "h100-pcie"):
        sku = catalog.get(sku_id)
        assert all(n.intra_node_link is LinkKind.PCIE for n in sku.nodes)
        assert {1, 8} <= {n.gpus_per_node for n in sku.nodes}


def test_relative_prices(catalog: Catalog) -> None:
    price = {sku.id: sku.price_per_gpu_hour for sku in catalog.skus()}
    assert price["a100-40gb"] < price["a100-80gb"] < price["h100-sxm"] < price["h200"]
    assert price["h200"] < price["b200"] < price["b300"]  # all AWS on-demand list prices
    assert "CoreWeave" in catalog.get("gb200").price_source  # no AWS on-demand GB200
    assert price["l4"] < price["l40s"]


def test_peak_flops_and_bytes(catalog: Catalog) -> None:
    h100 = catalog.get("h100-sxm")
    assert h100.peak_flops() == 989e12
    assert h100.peak_flops(fp8=True) == 1979e12
    assert catalog.get("a100-80gb").peak_flops(fp8=True) == 312e12  # no FP8: falls back
    assert h100.memory_bytes == 85.5e9


# ----------------------------------------------------------------------------- lookups


@pytest.mark.parametrize(
    "key", ["h100-sxm", "H100-SXM", " h100-sxm ", "H100-80GB-SXM", "h100-80gb-sxm"]
)
def test_lookup_by_id_or_name_any_case(catalog: Catalog, key: str) -> None:
    assert catalog.get(key).id == "h100-sxm"
    assert catalog[key].id == "h100-sxm"
    assert key in catalog


def test_unknown_id_lists_known_ids(catalog: Catalog) -> None:
    with pytest.raises(UnknownSkuError) as info:
        catalog.get("v100")
    message = str(info.value)
    assert "'v100'" in message
    for sku_id in REQUIRED_IDS:
        assert sku_id in message
    assert isinstance(info.value, CatalogError)
    assert isinstance(info.value, ValueError)
    assert "v100" not in catalog
    assert catalog.get("v100", None) is None


def test_catalog_is_immutable(catalog: Catalog) -> None:
    with pytest.raises(TypeError):
        catalog["x"] = catalog.get("l4")  # type: ignore[index]
    with pytest.raises(AttributeError):
        catalog.extra = 1  # type: ignore[attr-defined]


def test_sku_table_renders(catalog: Catalog) -> None:
    console = Console(width=250, record=True)
    console.print(format_sku_table(catalog, wide=True))
    text = console.export_text()
    for sku_id in REQUIRED_IDS:
        assert sku_id in text
    assert "H100-80GB-SXM" in text
    assert "nvswitch" in text


# ----------------------------------------------------------------------------- user files


def test_override_price_only(tmp_path: Path, catalog: Catalog) -> None:
    path = write(tmp_path, "gpus:\n  h100-sxm:\n    price_per_gpu_hour: 2.49\n")
    merged = load_catalog([path])
    h100 = merged.get("h100-sxm")
    assert h100.price_per_gpu_hour == 2.49
    base = catalog.get("h100-sxm")
    assert h100.memory_gb == base.memory_gb
    assert h100.nodes == base.nodes
    assert h100.price_source == base.price_source
    assert merged.ids() == catalog.ids()
    # the built-ins are not changed by a user file
    assert load_catalog().get("h100-sxm").price_per_gpu_hour == base.price_per_gpu_hour


def test_override_by_display_name_and_case(tmp_path: Path) -> None:
    path = write(tmp_path, "gpus:\n  H100-80GB-SXM:\n    price_per_gpu_hour: 3.0\n")
    assert load_catalog([str(path)]).get("h100-sxm").price_per_gpu_hour == 3.0


def test_later_files_win(tmp_path: Path) -> None:
    first = write(tmp_path, "gpus:\n  l4:\n    price_per_gpu_hour: 0.5\n", "a.yaml")
    second = write(tmp_path, "gpus:\n  l4:\n    price_per_gpu_hour: 0.6\n", "b.yaml")
    assert load_catalog([first, second]).get("l4").price_per_gpu_hour == 0.6


def test_override_nodes_replaces_the_list(tmp_path: Path) -> None:
    text = """
gpus:
  l40s:
    nodes:
      - {gpus_per_node: 2, intra_node_link: pcie,
         intra_node_bandwidth_gbps: 32, inter_node_bandwidth_gbps: 12.5}
"""
    sku = load_catalog([write(tmp_path, text)]).get("l40s")
    assert sku.nodes == (NodeShape(2, LinkKind.PCIE, 32.0, 12.5),)


def test_user_added_sku(tmp_path: Path) -> None:
    merged = load_catalog([write(tmp_path, MI300X)])
    sku = merged.get("MI300X")
    assert sku.id == "mi300x"
    assert sku.memory_gb == 192
    assert sku.price_date == "2025-10-01"
    assert sku.default_node.intra_node_bandwidth_gbps == 448
    assert merged.ids()[-1] == "mi300x"
    assert "mi300x" not in load_catalog()


def test_incomplete_new_sku_names_missing_field(tmp_path: Path) -> None:
    text = MI300X.replace("    memory_bandwidth_tbps: 5.3\n", "")
    path = write(tmp_path, text)
    with pytest.raises(CatalogError) as info:
        load_catalog([path])
    message = str(info.value)
    assert str(path) in message
    assert "mi300x" in message
    assert "memory_bandwidth_tbps" in message
    assert "missing" in message


def test_unknown_field_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "gpus:\n  h100-sxm:\n    prce_per_gpu_hour: 2.0\n")
    with pytest.raises(CatalogError) as info:
        load_catalog([path])
    message = str(info.value)
    assert str(path) in message
    assert "h100-sxm" in message
    assert "prce_per_gpu_hour" in message
    assert "price_per_gpu_hour" in message  # the allowed fields are listed


def test_bad_values_are_named(tmp_path: Path) -> None:
    text = """
gpus:
  h100-sxm:
    price_per_gpu_hour: -1
    architecture: pascal
    price_date: 2025-13-01
    nodes:
      - {gpus_per_node: 8, intra_node_link: nvlink,
         intra_node_bandwidth_gbps: 450, inter_node_bandwidth_gbps: 50}
"""
    with pytest.raises(CatalogError) as info:
        load_catalog([write(tmp_path, text)])
    message = str(info.value)
    assert "price_per_gpu_hour" in message
    assert "architecture" in message and "hopper" in message
    assert "price_date" in message and "2025-13-01" in message
    assert "nodes[0].intra_node_link" in message
    assert "nvlink-pairwise" in message  # allowed values listed


def test_bad_yaml_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "gpus:\n  h100-sxm:\n    price_per_gpu_hour: [2.0\n")
    with pytest.raises(CatalogError) as info:
        load_catalog([path])
    message = str(info.value)
    assert str(path) in message
    assert "YAML" in message
    assert "line" in message


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "gpus:\n  l4:\n    power_w: 70\n    power_w: 72\n")
    with pytest.raises(CatalogError, match="duplicate key 'power_w'"):
        load_catalog([path])


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(CatalogError, match="not found") as info:
        load_catalog([missing])
    assert str(missing) in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty"),
        ("- h100-sxm\n", "top-level 'gpus'"),
        ("skus:\n  l4: {}\n", "unknown top-level key"),
        ("gpus:\n  l4: 3\n", "expected a mapping"),
        ("gpus:\n  'My GPU': {name: x}\n", "lower-case"),
        ("gpus:\n  l4:\n    memory_gb: null\n", "cannot be null"),
        ("gpus:\n  l4:\n    memory_gb: '24'\n", "memory_gb"),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(CatalogError, match=expected):
        load_catalog([write(tmp_path, text)])


def test_duplicate_display_name_is_an_error(tmp_path: Path) -> None:
    text = MI300X.replace("name: MI300X", "name: H100-80GB-SXM")
    with pytest.raises(CatalogError, match="display names must be unique"):
        load_catalog([write(tmp_path, text)])
