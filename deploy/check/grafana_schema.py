"""Checks Grafana dashboards against the dashboard types of the Grafana Foundation SDK
(PyPI `grafana-foundation-sdk`, generated from Grafana's own schemas), since no Grafana runs here.

Two checks, each naming the path of what fails:
- every key is a field the types know: the SDK reads the dashboard (with its panel and query
  plugins: timeseries options, Prometheus queries) and writes it back, and whatever it does not
  know is lost on the way, so each key and value must come back unchanged;
- every value read has the type the SDK declares (enums by their values, a number where a float
  is declared, the panel plugin's own option types).

Usage: python3 grafana_schema.py DASHBOARD.json...   (exit 1 and a line per problem on failure)
"""

import enum
import json
import os
import sys
import types
import typing

# Installed beside this script by scripts/test.sh (pip install --target deploy/check/python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))

from grafana_foundation_sdk.cog import encoder, plugins
from grafana_foundation_sdk.models.dashboard import Dashboard

plugins.register_default_plugins()


def lost(original, back, path, out):
    """What of `original` did not come back unchanged in `back`."""
    if isinstance(original, dict):
        if not isinstance(back, dict):
            out.append(f"{path}: an object where the types hold {type(back).__name__}")
            return
        for key, value in original.items():
            if key not in back:
                out.append(f"{path}.{key}: not a field of the dashboard types")
            else:
                lost(value, back[key], f"{path}.{key}", out)
    elif isinstance(original, list):
        if not isinstance(back, list) or len(back) != len(original):
            out.append(f"{path}: a list read back as {back!r}")
            return
        for i, (a, b) in enumerate(zip(original, back)):
            lost(a, b, f"{path}[{i}]", out)
    elif original != back:
        out.append(f"{path}: {original!r} read back as {back!r}")


def conforms(value, hint):
    """Whether `value` is of the declared type `hint`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any or hint is object:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin is typing.Literal:
        return value in args
    if origin is list:
        return isinstance(value, list) and all(conforms(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return isinstance(value, hint) or value in [m.value for m in hint]
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def typed(obj, path, out, seen):
    """Checks every declared field of a model object, and the objects inside it."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            typed(v, f"{path}[{i}]", out, seen)
        return
    if not hasattr(obj, "to_json") or isinstance(obj, type):
        return
    try:
        hints = typing.get_type_hints(type(obj))
    except Exception:  # a type without resolvable hints (an unknown query kept as it was)
        hints = {}
    for name, hint in hints.items():
        value = getattr(obj, name, None)
        if not conforms(value, hint):
            out.append(f"{path}.{name}: {value!r} is not {hint}")
        typed(value, f"{path}.{name}", out, seen)


def check(path):
    with open(path, encoding="utf-8") as f:
        original = json.load(f)
    problems = []
    try:
        model = Dashboard.from_json(original)
    except Exception as e:  # a value of the wrong shape where the SDK expects an object
        return [f"$: the dashboard types cannot read it: {e!r}"]
    back = json.loads(json.dumps(model, cls=encoder.JSONEncoder))
    lost(original, back, "$", problems)
    typed(model, "$", problems, set())
    return problems


def main(paths):
    failed = False
    for path in paths:
        problems = check(path)
        if problems:
            failed = True
            for p in problems:
                print(f"{path}: {p}")
        else:
            print(f"{path}: ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
