"""Resource quantities, parsed as apimachinery's ``resource.Quantity`` does, in scheduler units.

Covers: the quantity grammar (SI, binary SI and exponent suffixes, signs, fractions),
what the API server rejects and the Python client would let through (``NaN``,
``1_000``, spaces, a trailing newline), YAML scalars (int, float, bool, null),
negative amounts in a ResourceList, and the scheduler's integer units: CPU in
millicores (``MilliValue``), everything else in whole units (``Value``), both rounded up.
"""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
import yaml

from compactor.errors import InputError
from compactor.model.quantity import format_amount, parse_quantity, parse_resource_list, to_scheduler_units

GI = 1 << 30
MI = 1 << 20


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("500m", Decimal("0.5"), id="milli"),
        pytest.param("1.5", Decimal("1.5"), id="decimal-fraction"),
        pytest.param("1Gi", Decimal(GI), id="binary-gi"),
        pytest.param("100Mi", Decimal(100 * MI), id="binary-mi"),
        pytest.param("1Ki", Decimal(1024), id="binary-ki"),
        pytest.param("1Ei", Decimal(1 << 60), id="binary-ei"),
        pytest.param("1e3", Decimal(1000), id="exponent-lower"),
        pytest.param("1E3", Decimal(1000), id="exponent-upper"),
        pytest.param("1e-3", Decimal("0.001"), id="exponent-negative"),
        pytest.param("1e+3", Decimal(1000), id="exponent-plus"),
        pytest.param("1.5e3", Decimal(1500), id="fraction-with-exponent"),
        pytest.param("2k", Decimal(2000), id="kilo"),
        pytest.param("1E", Decimal(10**18), id="exa-not-exponent"),
        pytest.param("3M", Decimal(3_000_000), id="mega"),
        pytest.param("5u", Decimal("0.000005"), id="micro"),
        pytest.param("7n", Decimal("0.000000007"), id="nano"),
        pytest.param("+1", Decimal(1), id="explicit-plus"),
        pytest.param("1.", Decimal(1), id="trailing-dot-as-go-allows"),
        pytest.param(".5", Decimal("0.5"), id="leading-dot"),
        pytest.param("0", Decimal(0), id="zero"),
    ],
)
def test_the_quantity_grammar_parses_each_suffix_exactly(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("NaN", id="nan"),
        pytest.param("Infinity", id="infinity"),
        pytest.param("1_000", id="underscore-digit-separator"),
        pytest.param(" 1", id="leading-space"),
        pytest.param("1 ", id="trailing-space"),
        pytest.param("1\n", id="trailing-newline"),
        pytest.param("abc", id="letters"),
        pytest.param("1Kb", id="bytes-suffix"),
        pytest.param("1K", id="uppercase-k-is-not-si"),
        pytest.param("1ki", id="lowercase-binary-k"),
        pytest.param("1mi", id="milli-binary"),
        pytest.param("1e", id="exponent-without-digits"),
        pytest.param("1e3m", id="exponent-then-suffix"),
        pytest.param("", id="empty"),
        pytest.param("0x10", id="hexadecimal"),
        pytest.param("\u0661", id="non-ascii-digit"),
        pytest.param("1/2", id="fraction-slash"),
    ],
)
def test_strings_the_api_server_rejects_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)


@pytest.mark.parametrize("value", [True, False, None, [1], {"cpu": 1}, float("nan"), float("inf")], ids=repr)
def test_non_quantity_scalars_are_rejected(value: object) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(value)


@pytest.mark.parametrize(
    ("document", "resource", "expected"),
    [
        pytest.param("cpu: 2", "cpu", 2000, id="yaml-int-cpu"),
        pytest.param("cpu: 1.5", "cpu", 1500, id="yaml-float-cpu"),
        pytest.param("cpu: 0.1", "cpu", 100, id="yaml-float-without-binary-drift"),
        pytest.param("cpu: .5", "cpu", 500, id="yaml-leading-dot-float"),
        pytest.param("memory: 1073741824", "memory", GI, id="yaml-int-memory"),
        pytest.param("nvidia.com/gpu: 8", "nvidia.com/gpu", 8, id="yaml-int-extended"),
        pytest.param("cpu: 1e3", "cpu", 1_000_000, id="yaml-1e3-stays-a-string"),
    ],
)
def test_yaml_scalars_parse_as_the_api_server_would_receive_them(document: str, resource: str, expected: int) -> None:
    raw = yaml.safe_load(document)
    assert parse_resource_list(raw) == {resource: expected}


def test_yaml_booleans_and_nulls_are_not_quantities() -> None:
    assert parse_resource_list({"nvidia.com/gpu": 1}) == {
        "nvidia.com/gpu": 1
    }  # memoised: True == 1 must not hit this entry
    with pytest.raises(InputError, match="invalid quantity True"):
        parse_resource_list(yaml.safe_load("nvidia.com/gpu: yes"))
    with pytest.raises(InputError, match="invalid quantity None"):
        parse_resource_list(yaml.safe_load("cpu:"))


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        pytest.param("cpu", "500m", 500, id="cpu-milli"),
        pytest.param("cpu", "1.5", 1500, id="cpu-fraction"),
        pytest.param("cpu", "2", 2000, id="cpu-whole"),
        pytest.param("cpu", "0.1m", 1, id="cpu-below-a-millicore-rounds-up"),
        pytest.param("cpu", "1500u", 2, id="cpu-micro-rounds-up"),
        pytest.param("cpu", "1n", 1, id="cpu-nano-rounds-up"),
        pytest.param("memory", "1Gi", GI, id="memory-bytes"),
        pytest.param("memory", "100Mi", 100 * MI, id="memory-mi"),
        pytest.param("memory", "1.5Gi", 3 * GI // 2, id="memory-fractional-gi"),
        pytest.param("memory", "500m", 1, id="memory-fraction-of-a-byte-rounds-up"),
        pytest.param("memory", "1e3", 1000, id="memory-exponent"),
        pytest.param("memory", "2k", 2000, id="memory-kilo-is-decimal"),
        pytest.param("ephemeral-storage", "1E", 10**18, id="storage-exa"),
        pytest.param("pods", "110", 110, id="pods"),
        pytest.param("nvidia.com/gpu", "1", 1, id="extended-whole"),
        pytest.param("nvidia.com/gpu", "1500m", 2, id="extended-fraction-rounds-up"),
        pytest.param("nvidia.com/gpu", "0.1", 1, id="extended-small-fraction-rounds-up"),
        pytest.param("nvidia.com/mig-1g.5gb", 7, 7, id="extended-int"),
        pytest.param("hugepages-2Mi", "4Mi", 4 * MI, id="hugepages-bytes"),
    ],
)
def test_scheduler_units_are_millicores_for_cpu_and_whole_units_otherwise(
    resource: str, text: object, expected: int
) -> None:
    assert to_scheduler_units(resource, text) == expected


def test_a_resource_list_keeps_zero_entries_and_parses_every_value() -> None:
    assert parse_resource_list({"cpu": "0", "memory": "1Gi", "nvidia.com/gpu": 8}) == {
        "cpu": 0,
        "memory": GI,
        "nvidia.com/gpu": 8,
    }


def test_an_absent_resource_list_is_empty() -> None:
    assert parse_resource_list(None) == {}


def test_a_negative_quantity_in_a_resource_list_names_the_resource() -> None:
    with pytest.raises(InputError) as caught:
        parse_resource_list(
            {"cpu": "-1"}, source="snap.json", obj="Pod ns/a", field="spec.containers[0].resources.requests"
        )
    assert str(caught.value) == "snap.json: Pod ns/a: spec.containers[0].resources.requests.cpu: negative quantity '-1'"


def test_negative_zero_is_zero_not_negative() -> None:
    assert parse_resource_list({"cpu": "-0"}) == {"cpu": 0}


def test_an_invalid_quantity_in_a_resource_list_names_file_object_and_field() -> None:
    with pytest.raises(InputError) as caught:
        parse_resource_list({"memory": "1Kb"}, source="a.yaml", obj="Node n1", field="status.allocatable")
    assert caught.value.source == "a.yaml"
    assert caught.value.obj == "Node n1"
    assert caught.value.field == "status.allocatable.memory"
    assert str(caught.value) == "a.yaml: Node n1: status.allocatable.memory: invalid quantity '1Kb'"


def test_a_resource_list_that_is_not_a_map_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"status\.allocatable: expected a map of resource quantities"):
        parse_resource_list(["cpu", "1"], source="a.yaml", obj="Node n1", field="status.allocatable")


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        pytest.param("cpu", 1500, "1500m", id="cpu-milli"),
        pytest.param("cpu", 2000, "2", id="cpu-whole"),
        pytest.param("memory", 16 * GI, "16Gi", id="memory-gi"),
        pytest.param("memory", 1000, "1000", id="memory-not-binary"),
        pytest.param("memory", 1536 * MI, "1536Mi", id="memory-mi"),
        pytest.param("nvidia.com/gpu", 4, "4", id="extended"),
    ],
)
def test_amounts_are_formatted_back_in_kubernetes_notation(resource: str, amount: int, text: str) -> None:
    assert format_amount(resource, amount) == text
    assert to_scheduler_units(resource, text) == amount


def test_memoised_units_keep_number_and_text_forms_apart() -> None:
    assert to_scheduler_units("cpu", 0.5) == 500
    assert to_scheduler_units("cpu", "0.5") == 500
    assert to_scheduler_units("cpu", 1) == 1000
    with pytest.raises(ValueError, match="invalid quantity"):
        to_scheduler_units("cpu", ["1"])  # unhashable: checked, not memoised


# ------------------------------------------------------------------ size limits: what kube-scheduler can count
# The API server stores decimal quantities of any size and caps binary-SI ones at 2^63-1 (ParseQuantity);
# kube-scheduler counts cpu in millicores and the rest in units as int64, so anything beyond is refused.

INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        pytest.param("cpu", "9223372036854775.807", INT64_MAX, id="cpu-at-the-int64-millicore-limit"),
        pytest.param("cpu", "1e15", 10**18, id="cpu-huge-but-countable"),
        pytest.param("memory", "9223372036854775807", INT64_MAX, id="memory-at-the-limit"),
        pytest.param("memory", "1e18", 10**18, id="memory-exabyte"),
        pytest.param("nvidia.com/gpu", 10**18, 10**18, id="gpu-json-integer"),
        pytest.param("memory", "8Ei", INT64_MAX, id="binary-si-capped-like-parse-quantity"),
        pytest.param("memory", "100Ei", INT64_MAX, id="binary-si-far-beyond-capped"),
        pytest.param("cpu", "1e-999999999", 1, id="tiny-positive-rounds-up-not-to-zero"),
    ],
)
def test_amounts_up_to_the_schedulers_int64_are_counted(resource: str, value: object, expected: int) -> None:
    assert to_scheduler_units(resource, value) == expected


@pytest.mark.parametrize(
    ("resource", "value", "limit"),
    [
        pytest.param("cpu", "1e18", "9223372036854775807m", id="cpu-1e18-cores-is-1e21-millicores"),
        pytest.param("cpu", "9223372036854775.808", "9223372036854775807m", id="cpu-one-millicore-past"),
        pytest.param("memory", "9223372036854775808", "9223372036854775807", id="memory-one-byte-past"),
        pytest.param("nvidia.com/gpu", "1e100000", "9223372036854775807", id="gpu-hundred-thousand-digit-exponent"),
        pytest.param("memory", "1e999999999999", "9223372036854775807", id="exponent-beyond-decimal-context"),
        pytest.param("cpu", 10**30, "9223372036854775807m", id="json-integer"),
        pytest.param("cpu", 1e300, "9223372036854775807m", id="json-float"),
        pytest.param("nvidia.com/gpu", "1" + "0" * 100_000, "9223372036854775807", id="hundred-thousand-digits"),
        pytest.param("memory", "10E", "9223372036854775807", id="exa-decimal-si-is-not-capped"),
    ],
)
def test_amounts_beyond_the_schedulers_int64_are_refused_quickly(resource: str, value: object, limit: str) -> None:
    started = time.monotonic()
    with pytest.raises(ValueError, match="too large") as caught:
        to_scheduler_units(resource, value)
    assert time.monotonic() - started < 1.0
    message = str(caught.value)
    assert f"kube-scheduler counts {resource} in" in message and message.endswith(f"at most {limit}")
    assert "\n" not in message and len(message) < 200  # one short line, even for 100,000 digits


def test_a_too_large_quantity_in_a_pod_names_file_pod_and_field() -> None:
    with pytest.raises(InputError) as caught:
        parse_resource_list(
            {"cpu": "1e18"}, source="snap.json", obj="Pod ns/a", field="spec.containers[0].resources.requests"
        )
    assert str(caught.value) == (
        "snap.json: Pod ns/a: spec.containers[0].resources.requests.cpu: quantity '1e18' is too large: "
        "kube-scheduler counts cpu in millicores as a 64-bit integer, at most 9223372036854775807m"
    )


def test_memory_limits_are_stated_in_bytes() -> None:
    with pytest.raises(ValueError, match="counts memory in bytes"):
        to_scheduler_units("memory", "1e19")
