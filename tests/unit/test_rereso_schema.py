"""The shipped ReReSo 0.3 schemas and the validator built on them."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import yaml

from shournal.rereso import schema

# The descriptors of the paper's Figures 4 and 5.
PAPER_BENCHMARK = """
rereso-benchmark-version: '0.3'
metadata:
  name: Renassiance Painting Database
  description: A collection of Renassiance paintings.
  references:
    - https://paintings.art/
license:
  spdx: CC0-1.0
format:
  media-type: application/json5
  schemas:
    - https://images.art/images-2.json
    - https://generic-schemas.org/described-items-0.1.json
    - https://authorship.com/work-information-1.1.json
benchmarks:
  - path: renassiance-paintings.json5
"""

PAPER_TOOL = """
rereso-tool-version: '0.3'
metadata:
  name: Image Metadata Learning Toolbox
  description: A toolbox for learning authors and titles from images.
  references:
    - https://image-recognition.tools/
license:
  spdx: AGPL-3.0-or-later
commands:
  - name: train-classifier [input.json] [classifier.onnx]
    input-formats:
      - media-type: application/json5
        schemas:
          - https://images.art/images-2.json
    output-formats:
      - media-type: application/x-onnx
  - name: classify-all [images.json] [classifier.onnx] [result.json]
    input-formats:
      - media-type: application/json5
      - media-type: application/x-onnx
    output-formats:
      - media-type: application/json5
container: imlt.sif
"""


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation must never fetch a schema: any socket is an error."""

    def refuse(*_a: Any, **_k: Any) -> None:
        raise AssertionError("network access during validation")

    schema._validator.cache_clear()
    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_schemas_declare_draft_07_and_are_valid_schemas():
    from jsonschema import Draft7Validator

    for name in schema.SCHEMA_FILES:
        doc = schema.load_schema(name)
        assert doc["$schema"] == "http://json-schema.org/draft-07/schema"
        assert doc["$id"].endswith("/" + name)
        Draft7Validator.check_schema(doc)
    assert type(schema._validator(schema.TOOL_SCHEMA)) is Draft7Validator


def test_attribution_ships_with_the_schemas():
    from importlib import resources

    here = resources.files("shournal.rereso").joinpath("schemas")
    notice = here.joinpath("NOTICE").read_text("utf-8")
    assert "CC-BY-4.0" in notice and "The ReReSo Authors" in notice
    for name in schema.SCHEMA_FILES:
        assert "SPDX-License-Identifier: CC-BY-4.0" in here.joinpath(name).read_text("utf-8")


def test_the_papers_examples_are_valid():
    assert schema.errors(yaml.safe_load(PAPER_TOOL), schema.TOOL_SCHEMA) == []
    assert schema.errors(yaml.safe_load(PAPER_BENCHMARK), schema.BENCHMARK_SCHEMA) == []


def test_violations_inside_the_common_file_are_found_through_the_ref():
    """``media-type`` and ``license`` are defined in common-0.3.json5: their
    violations are seen only when the cross-file $ref resolves."""
    tool = yaml.safe_load(PAPER_TOOL)
    tool["commands"][1]["input-formats"][1]["media-type"] = "onnx"
    tool["license"] = {"spdx": "MIT", "custom": "also this"}
    found = schema.errors(tool, schema.TOOL_SCHEMA)
    assert len(found) == 2, found
    assert found[0].startswith("commands/1/input-formats/1/media-type: 'onnx' does not match")
    assert found[1].startswith("license: ")


@pytest.mark.parametrize(
    ("drop", "expected"),
    [
        ("container", "(top level): 'container' is a required property"),
        ("license", "(top level): 'license' is a required property"),
        ("commands", "(top level): 'commands' is a required property"),
    ],
)
def test_required_tool_fields(drop: str, expected: str):
    tool = yaml.safe_load(PAPER_TOOL)
    del tool[drop]
    assert schema.errors(tool, schema.TOOL_SCHEMA) == [expected]


def test_wrong_version_and_empty_benchmarks():
    bench = yaml.safe_load(PAPER_BENCHMARK)
    bench["rereso-benchmark-version"] = "0.2"
    bench["benchmarks"] = []
    found = schema.errors(bench, schema.BENCHMARK_SCHEMA)
    assert any(f.startswith("benchmarks: [] should be non-empty") for f in found), found
    assert any(f.startswith("rereso-benchmark-version: '0.3' was expected") for f in found), found


def test_check_raises_one_line():
    with pytest.raises(schema.DescriptorInvalid) as exc:
        schema.check({"metadata": {}}, schema.BENCHMARK_SCHEMA, "x/rereso-benchmark.yml")
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("x/rereso-benchmark.yml is not a valid ReReSo descriptor: ")
    assert "more)" in msg
