"""The project's one YAML reader (compactor/model/yamlsafe.py): what yaml.safe_load reads, minus anchors, aliases and
unbounded nesting, each refused in one line that says where."""

from __future__ import annotations

import pytest
import yaml

from compactor.model.yamlsafe import YamlRefused, describe_yaml_error, load_yaml, load_yaml_documents

STREAM = (
    "kind: Pod\nmetadata: {name: a, labels: {app: web}}\nspec:\n  containers:\n  - resources: {requests: {cpu: 500m}}\n"
    "---\n---\nx: [1, 2.5, true, null, '3']\n"
)


def test_plain_documents_read_as_safe_load_reads_them() -> None:
    assert load_yaml_documents(STREAM) == list(yaml.safe_load_all(STREAM))
    assert load_yaml("a: [1, {b: c}]") == {"a": [1, {"b": "c"}]}
    assert load_yaml("") is None and load_yaml_documents("") == []


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param("a: &x [1]\nb: *x\n", 1, id="alias-of-a-list"),
        pytest.param("a: 1\nb: &x 2\n", 2, id="anchor-without-alias"),
        pytest.param("a: 1\nb: 2\nc: *x\n", 3, id="alias-without-anchor"),
        pytest.param("a: &x {k: v}\nb: {<<: *x}\n", 1, id="merge-key"),
        pytest.param("- &x [*x]\n", 1, id="recursive"),
    ],
)
def test_anchors_and_aliases_are_refused_with_their_line(text: str, line: int) -> None:
    with pytest.raises(YamlRefused) as caught:
        load_yaml_documents(text)
    assert str(caught.value) == f"YAML anchors and aliases (&name, *name) are not accepted (line {line})"


def test_an_alias_in_a_later_document_is_refused_too() -> None:
    with pytest.raises(YamlRefused, match=r"\(line 3\)"):
        load_yaml_documents("a: 1\n---\nb: &x 1\n")


def test_nesting_deeper_than_the_composer_recurses_is_refused() -> None:
    with pytest.raises(YamlRefused, match=r"^YAML nested too deeply to read$"):
        load_yaml("a: " + "[" * 900 + "]" * 900)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("day: 2024-02-31", "day is out of range for month", id="impossible-date"),
        pytest.param("n: " + "9" * 5000, "Exceeds the limit (4300 digits)", id="5000-digit-integer"),
    ],
)
def test_scalars_the_constructor_cannot_convert_are_refused_in_one_line(text: str, problem: str) -> None:
    with pytest.raises(YamlRefused) as caught:
        load_yaml(text)
    assert str(caught.value).startswith(f"unreadable YAML value: {problem}") and "\n" not in str(caught.value)


def test_python_tags_stay_refused_as_safe_load_refuses_them() -> None:
    with pytest.raises(yaml.constructor.ConstructorError):
        load_yaml("a: !!python/object/apply:os.system ['true']")


def test_malformed_yaml_is_described_in_one_line_with_its_place() -> None:
    with pytest.raises(yaml.YAMLError) as caught:
        load_yaml("a: [1, 2\nb: 3\n")
    assert describe_yaml_error(caught.value).startswith("malformed YAML at line 2 column")
