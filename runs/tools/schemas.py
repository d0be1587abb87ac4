"""JSON Schemas (draft 2020-12) that clients send: checked so that validating with them is safe.

A client step's ``args_schema`` (the SDK, the OpenAI Agents SDK integration, an MCP gateway's
upstream) is the client's text, run in the web and worker processes. So, beyond being a valid
schema (``check_schema`` against the draft 2020-12 meta-schema), it must not:
- reach outside itself: a ``$ref`` (or ``$dynamicRef``) resolves only inside the schema, its
  embedded ``$id`` resources and the JSON Schema meta-schemas bundled with
  ``jsonschema-specifications``; nothing is ever retrieved (jsonschema's default retrieves
  remote ``http(s)://`` and ``file://`` documents, with no timeout);
- loop without end: references and in-place applicators (``allOf``, ``anyOf``, ``oneOf``,
  ``not``, ``if``/``then``/``else``, ``dependentSchemas``) that come back to a subschema at the
  same place in the instance would recurse until Python's stack runs out;
- backtrack without end: ``pattern`` and ``patternProperties`` (and ``additionalProperties``,
  which asks them) run on RE2 (google-re2), which matches in time linear in the text; a pattern
  RE2 cannot compile (backreferences, lookaround: outside JSON Schema's recommended subset,
  draft 2020-12 §6.4 of the validation vocabulary) is refused. ``unevaluatedProperties`` is
  refused in a schema that also has ``patternProperties``: jsonschema evaluates that pair with
  Python's backtracking ``re``;
- nest deeper than ``MAX_SCHEMA_DEPTH`` objects and arrays.

Validating a deeply nested instance against a recursive schema may still run out of stack: that
is reported as a problem of the value (``schema_problem``), never raised.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import jsonschema_specifications
import re2
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

# Objects and arrays a client's schema may nest (tool schemas generated from pydantic models
# or MCP servers' tool lists nest a dozen or so).
MAX_SCHEMA_DEPTH = 64
# Keywords whose subschemas apply to the same place in the instance (draft 2020-12 core §10.2).
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_REFERENCES = ("$ref", "$dynamicRef")
# A ``referencing`` resolver: the base URI in scope at a subschema (its class is not exported).
Resolver = Any


class UnsafeSchema(ValueError):
    """A schema that is valid JSON Schema but may not be run (see the module text)."""


# The meta-schemas bundled with jsonschema-specifications, and no way to retrieve anything else.
_SPECIFICATIONS = jsonschema_specifications.REGISTRY
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2.

    Raises:
        UnsafeSchema: RE2 cannot compile it.
    """
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except (re2.error, UnicodeError) as exc:
        raise UnsafeSchema(
            f"pattern {pattern!r} is not supported (RE2 syntax: no backreferences or "
            f"lookaround): {exc}"
        ) from None


def _pattern(
    validator: Validator, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Validator, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _regex(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Validator, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [_regex(pattern) for pattern in schema.get("patternProperties", {})]
    extras = [
        key
        for key in instance
        if key not in properties and not any(regex.search(key) for regex in patterns)
    ]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        listed = ", ".join(repr(key) for key in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            shown = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield ValidationError(f"{listed} {verb} not match any of the regexes: {shown}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


ClientSchemaValidator = extend(
    Draft202012Validator,
    validators={
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_SCHEMA_DEPTH:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _in_place(contents: dict[str, Any]) -> Iterator[Any]:
    """The subschemas ``contents`` applies to the same place in the instance, references
    aside."""
    for keyword in _IN_PLACE_ONE:
        if keyword in contents:
            yield contents[keyword]
    for keyword in _IN_PLACE_MANY:
        if isinstance(contents.get(keyword), list):
            yield from contents[keyword]
    if isinstance(contents.get("dependentSchemas"), dict):
        yield from contents["dependentSchemas"].values()


def _targets(contents: dict[str, Any], resolver: Resolver) -> Iterator[tuple[Any, Resolver]]:
    """What ``contents`` references, with the resolver in scope there.

    Raises:
        UnsafeSchema: a reference does not resolve inside the schema.
    """
    for keyword in _REFERENCES:
        reference = contents.get(keyword)
        if not isinstance(reference, str):
            continue
        try:
            resolved = resolver.lookup(reference)
        except Unresolvable:
            raise UnsafeSchema(
                f"{keyword} {reference!r} does not resolve inside the schema (references "
                "to other documents are not followed)"
            ) from None
        yield resolved.contents, resolved.resolver


def _subschemas(schema: dict[str, Any]) -> list[tuple[Any, Resolver]]:
    """Every subschema of ``schema`` (draft 2020-12's keywords, via ``referencing``), each with
    the resolver of the base URI in scope there."""
    root = DRAFT202012.create_resource(schema)
    found, resources = [], [(root, _SPECIFICATIONS.resolver_with_root(root))]
    while resources:
        resource, scope = resources.pop()
        found.append((resource.contents, scope))
        resources.extend((sub, scope.in_subresource(sub)) for sub in resource.subresources())
    return found


def _check_patterns(subschemas: list[tuple[Any, Resolver]]) -> None:
    """Every ``pattern`` and ``patternProperties`` key compiles on RE2, and
    ``unevaluatedProperties`` does not meet ``patternProperties``.

    Raises:
        UnsafeSchema: what is wrong.
    """
    keywords: set[str] = set()
    for contents, _ in subschemas:
        if not isinstance(contents, dict):
            continue
        keywords.update(contents)
        if isinstance(contents.get("pattern"), str):
            _regex(contents["pattern"])
        for pattern in contents.get("patternProperties") or {}:
            _regex(pattern)
    if {"unevaluatedProperties", "patternProperties"} <= keywords:
        raise UnsafeSchema(
            "unevaluatedProperties may not be combined with patternProperties in one schema"
        )


def _check_references(subschemas: list[tuple[Any, Resolver]]) -> None:
    """Every reference resolves locally, and no chain of references and in-place applicators
    comes back to where it started (depth first, a subschema known by its identity).

    Raises:
        UnsafeSchema: what is wrong.
    """
    for contents, scope in subschemas:
        if isinstance(contents, dict):
            list(_targets(contents, scope))
    done: set[int] = set()
    for start, start_scope in subschemas:
        path: set[int] = set()
        stack: list[tuple[Any, Resolver, bool]] = [(start, start_scope, False)]
        while stack:
            contents, scope, leaving = stack.pop()
            if leaving:
                path.discard(id(contents))
                done.add(id(contents))
                continue
            if not isinstance(contents, dict) or id(contents) in done:
                continue
            if id(contents) in path:
                raise UnsafeSchema("the schema's references loop back to the same place")
            path.add(id(contents))
            stack.append((contents, scope, True))
            for sub in _in_place(contents):
                sub_scope = scope.in_subresource(DRAFT202012.create_resource(sub))
                stack.append((sub, sub_scope, False))
            stack.extend((target, where, False) for target, where in _targets(contents, scope))


@functools.lru_cache(maxsize=256)
def _checked_schema(text: str) -> tuple[Validator | None, str | None]:
    """The validator of the client's JSON Schema whose compact JSON is ``text``, or why it may
    not be used: checking one costs a few ms, and a client (the MCP gateway's upstreams) sends
    the same few schemas with every call."""
    schema = json.loads(text)
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        return None, f"a schema nests at most {MAX_SCHEMA_DEPTH} objects and arrays deep"
    try:
        ClientSchemaValidator.check_schema(schema)
        subschemas = _subschemas(schema)
        _check_patterns(subschemas)
        _check_references(subschemas)
    except SchemaError as exc:
        return None, exc.message
    except UnsafeSchema as exc:
        return None, str(exc)
    return ClientSchemaValidator(schema, registry=_SPECIFICATIONS), None


def _schema_key(schema: dict[str, Any]) -> str:
    # Key order kept: it decides which of several errors ``best_match`` reports.
    return json.dumps(schema, separators=(",", ":"))


def schema_problem(schema: dict[str, Any], value: Any) -> str | None:
    """Why ``value`` fails the client's JSON Schema (draft 2020-12) ``schema``, or None when it
    passes: the best-matching error, prefixed with the path to the failing part. A schema that
    may not be used (``schema_invalid``) is the problem ``(schema): <why>``; a value nested
    too deep for a recursive schema is a problem too, never an exception."""
    validator, invalid = _checked_schema(_schema_key(schema))
    if validator is None:
        return f"(schema): {invalid}"
    try:
        error = best_match(validator.iter_errors(value))
    except RecursionError:
        return "(root): the value nests too deeply for the schema to check"
    except UnicodeError:
        return "(root): a string is not valid Unicode (a lone surrogate)"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"


def schema_invalid(schema: Any) -> str | None:
    """Why ``schema`` is not a JSON Schema (draft 2020-12) object that may be used on a
    client's values (see the module text), or None when it may."""
    if not isinstance(schema, dict):
        return "must be a JSON Schema object"
    try:
        key = _schema_key(schema)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"must be JSON: {exc}"
    return _checked_schema(key)[1]
