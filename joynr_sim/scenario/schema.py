"""The shipped JSON Schema (``scenario.schema.json``, maintained by hand) as the loader uses
it: a Draft 2020-12 validator, one readable message for the first problem in a file, and
the schema's defaults filled in.

Two choices where Python would read the schema differently from an editor:
- JSON Schema patterns are ECMA-262 regexes, where ``$`` matches only at the very end;
  Python's ``$`` also matches before a final newline, so ``"app1\\n"`` would pass as an id.
  The validator reads a pattern's final ``$`` as ``\\Z`` (the schema's patterns have no
  other ``$``; a test holds that).
- JSON Schema counts ``5000.0`` as an integer; a scenario writes counts and milliseconds as
  whole numbers, so only a Python ``int`` (not a bool) is one here.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match

SCHEMA_PATH = Path(__file__).with_name("scenario.schema.json")

At = tuple[str | int, ...]  # where a value sits in the document: keys and list indices


@functools.cache
def _regex(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _is_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


ScenarioValidator = jsonschema.validators.extend(
    Draft202012Validator,
    validators={"pattern": _pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


@functools.cache
def schema() -> dict[str, Any]:
    """The shipped schema (do not modify the returned dict)."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@functools.cache
def validator() -> Any:
    return ScenarioValidator(schema())


def first_problem(data: Any, line_of: Callable[[At], int]) -> tuple[At, str] | None:
    """Where the first problem in the file is (by line) and what it is, or None."""
    errors = list(validator().iter_errors(data))
    if not errors:
        return None
    first = min(line_of(_where(e)[0]) for e in errors)
    error = best_match(e for e in errors if line_of(_where(e)[0]) == first)
    return _where(error)


# -- one line per error ----------------------------------------------------------------------

_TYPES = {"string": "a string", "integer": "an integer", "number": "a number",
          "boolean": "true or false", "array": "a list", "object": "a mapping",
          "null": "nothing (null)"}


def _got(value: Any) -> str:
    """The value as a message shows it: short, one line."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (true or false)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    kind = {str: "a string", int: "an integer", float: "a number"}.get(type(value), type(value).__name__)
    return f"{_short(value)} ({kind})"


def _short(value: Any) -> str:
    text = repr(value)  # a str's repr escapes line breaks and control characters: one line
    return text if len(text) <= 80 else text[:77] + "..."


def _where(error: ValidationError) -> tuple[At, str]:
    """The path a reader should look at and one line saying what is wrong there."""
    at: At = tuple(error.absolute_path)
    value, kw, arg, sub = error.instance, error.validator, error.validator_value, error.schema
    if kw == "type":
        wanted = [arg] if isinstance(arg, str) else list(arg)
        hint = " (quote it)" if "string" in wanted and isinstance(value, (int, float, bool)) else ""
        return at, f"expected {' or '.join(_TYPES[t] for t in wanted)}, got {_got(value)}{hint}"
    if kw == "additionalProperties":
        allowed = list(sub.get("properties", {}))
        key = next(k for k in value if k not in allowed)
        if sub.get("maxProperties") == 1:  # a step: its one key is its kind
            return (*at, key), f"unknown step kind {_short(key)}; choose one of {', '.join(allowed)}"
        where = f" for {sub['title']}" if "title" in sub and sub is not schema() else ""
        return (*at, key), f"unknown key{where}; expected one of {', '.join(allowed)}"
    if kw == "required":
        missing = next(k for k in arg if k not in value)
        return at, f"missing required key {missing!r}"
    if kw in ("minProperties", "maxProperties"):  # only a step has these
        keys = ", ".join(_short(k) for k in value) or "none"
        return at, f"a step is a mapping with one key, its kind; got keys {keys}"
    if kw == "oneOf" and all(list(b) == ["required"] and len(b["required"]) == 1 for b in arg):
        choices = [b["required"][0] for b in arg]
        given = [k for k in choices if isinstance(value, dict) and k in value]
        return at, (f"give exactly one of {', '.join(choices)}"
                    + (f"; got {', '.join(given)}" if given else ""))
    if kw == "uniqueItems":
        i = next(i for i, v in enumerate(value) if v in value[:i])
        return (*at, i), f"{_short(value[i])} is listed twice"
    if kw == "enum":
        return at, f"{_short(value)} is not one of {', '.join(map(str, arg))}"
    if kw == "const":
        return at, f"must be {json.dumps(arg)}, got {_got(value)}"
    if kw == "pattern":
        return at, f"{_short(value)} does not match {arg}"
    if kw == "not":
        return at, f"{_short(value)} is {arg.get('description', 'not allowed here')}"
    if kw == "minimum":
        return at, f"must be at least {arg}, got {value}"
    if kw == "maximum":
        return at, f"must be at most {arg}, got {value}"
    if kw == "minItems":
        return at, f"must have at least {arg} item(s)"
    if kw == "maxItems":
        return at, f"must have at most {arg} items, got {len(value)}"
    if kw == "maxLength":
        return at, f"must be at most {arg} characters long, got {len(value)}"
    return at, " ".join(error.message.split())[:200]  # pragma: no cover - a keyword not used yet


# -- defaults --------------------------------------------------------------------------------

def _resolved(sub: dict[str, Any]) -> dict[str, Any]:
    """``sub`` with its local ``$ref`` (``#/$defs/name``) merged in, the siblings winning."""
    while "$ref" in sub:
        name = sub["$ref"].removeprefix("#/$defs/")
        sub = {**schema()["$defs"][name], **{k: v for k, v in sub.items() if k != "$ref"}}
    return sub


def with_defaults(data: Any, sub: dict[str, Any] | None = None) -> Any:
    """A copy of valid ``data`` where every optional key of a mapping is present, holding the
    schema's ``default`` or None; except in a choice of one key (a step; ``expect`` and
    ``until``, whose keys are all one-of), which keeps only the key given."""
    sub = _resolved(schema() if sub is None else sub)
    if isinstance(data, list):
        return [with_defaults(v, sub.get("items", {})) for v in data]
    if not isinstance(data, dict):
        return data
    props = dict(sub.get("properties", {}))
    for branch in sub.get("allOf", ()):
        if "if" in branch and ScenarioValidator(branch["if"]).is_valid(data):
            props.update(_resolved(branch["then"]).get("properties", {}))
    out = {k: with_defaults(v, props.get(k, {})) for k, v in data.items()}
    one_of = {k for b in sub.get("oneOf", ()) for k in b.get("required", ())}
    if sub.get("maxProperties") == 1 or (one_of and one_of == set(props)):
        return out
    for key, spec in props.items():
        if key not in out:
            out[key] = copy.deepcopy(_resolved(spec).get("default"))
    return out
