"""Validating ReReSo descriptors against the shipped 0.3 schemas.

The schemas (``schemas/``, CC-BY-4.0, see ``schemas/NOTICE``) are JSON5 and
declare JSON Schema draft-07.  They ``$ref`` each other by relative name
(``common-0.3.json5#/definitions/...``), which resolves against the
referring schema's ``$id``; all three are put into one
:class:`referencing.Registry` keyed by those ids, so nothing is fetched.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

TOOL_SCHEMA = "tool-0.3.json5"
BENCHMARK_SCHEMA = "benchmark-set-0.3.json5"
COMMON_SCHEMA = "common-0.3.json5"
SCHEMA_FILES = (COMMON_SCHEMA, TOOL_SCHEMA, BENCHMARK_SCHEMA)

# The descriptor file names and version the paper and schemas fix.
TOOL_DESCRIPTOR = "rereso-tool.yml"
BENCHMARK_DESCRIPTOR = "rereso-benchmark.yml"
RERESO_VERSION = "0.3"


class DescriptorInvalid(Exception):
    """A descriptor does not satisfy its schema (one-line message)."""


def _schema_text(name: str) -> str:
    return resources.files("shournal.rereso").joinpath("schemas", name).read_text("utf-8")


@functools.cache
def load_schema(name: str) -> Mapping[str, Any]:
    """The parsed schema file ``name`` (one of :data:`SCHEMA_FILES`)."""
    import json5

    if name not in SCHEMA_FILES:
        raise ValueError(f"unknown schema {name}")
    parsed: Mapping[str, Any] = json5.loads(_schema_text(name))
    return parsed


@functools.cache
def _validator(name: str) -> Validator:
    from jsonschema import Draft7Validator
    from jsonschema.validators import validator_for
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    schemas = {n: load_schema(n) for n in SCHEMA_FILES}
    registry: Registry[Any] = Registry().with_resources(
        (s["$id"], Resource.from_contents(s, default_specification=DRAFT7))
        for s in schemas.values()
    )
    schema = schemas[name]
    cls = validator_for(schema, default=Draft7Validator)
    if cls is not Draft7Validator:  # the shipped files declare draft-07
        raise RuntimeError(f"{name} declares {schema.get('$schema')}, expected draft-07")
    cls.check_schema(schema)
    return cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER)


def errors(document: Any, schema: str) -> list[str]:
    """Every violation of ``schema`` by ``document``, each as one line
    ``where: what`` (empty when valid)."""
    found = []
    for err in sorted(_validator(schema).iter_errors(document), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        found.append(f"{where}: {' '.join(err.message.split())}")
    return found


def check(document: Any, schema: str, shown: str) -> None:
    """:raises DescriptorInvalid: ``document`` (named ``shown`` in the
    message) does not satisfy ``schema``."""
    problems = errors(document, schema)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise DescriptorInvalid(f"{shown} is not a valid ReReSo descriptor: {problems[0]}{more}")
