"""Engine schemas from the generated engine tables (the same JSON files spec_config reads).

The tables are written by `scripts/engine_tables.py` from upstream (`llm_args.py` and the trtllm-serve
command for TensorRT-LLM) and live in `plugins/plugin_utils/engine_tables/`. In the emulator image they
are copied next to this package (`specdec_emulator/engine_tables/`); in a checkout they are found at
their place in the repository. `SPECDEC_EMU_TABLES` overrides both. Every emulated TensorRT-LLM release
has a table; trtllm_args.py and trtllm_cli.py take every class, field, alias, literal, decoding type
and serve option from it.
"""

import json
import os
import sys
from pathlib import Path

from .validation import Field, Model
from .versions import parse

_HERE = Path(__file__).resolve().parent
_CANDIDATES = (_HERE / "engine_tables", _HERE.parents[2] / "plugins" / "plugin_utils" / "engine_tables")
_CACHE = {}


def tables_dir():
    env = os.environ.get("SPECDEC_EMU_TABLES")
    if env:
        return Path(env)
    for path in _CANDIDATES:
        if (path / "index.json").exists():
            return path
    return None


def trtllm_table(version):
    """The table for an emulated TensorRT-LLM version: its own, or the newest of a 1.3 release (an engine
    release the collection has no table for, which its instances serve only with judged_in_image_only; the
    emulator says on stderr which table stands in for it); None when there is none."""
    folder = tables_dir()
    if folder is None:
        return None
    key = (str(folder), version)
    if key not in _CACHE:
        index = json.loads((folder / "index.json").read_text())
        rows = index.get("tables", {}).get("trtllm", {})
        base = version.split(".post")[0]
        name = base if base in rows else None
        if name is None and parse(version)[:2] == (1, 3):
            same = sorted((v for v in rows if parse(v)[:2] == (1, 3)), key=parse)
            name = same[-1] if same else None
            if name:
                print("emulator: TensorRT-LLM %s has no table of its own; emulated with the %s table" % (version, name),
                      file=sys.stderr)
        _CACHE[key] = json.loads((folder / rows[name]["file"]).read_text()) if name else None
    return _CACHE[key]


def value_rule_problem(rule, value):
    """What upstream's field validator says of a value, for the rules a table names (None when fine)."""
    if rule["rule"] == "enum_name_case_insensitive":
        # upstream looks `value.upper()` up among the enum's member names
        if isinstance(value, str) and value.upper() in rule["names"]:
            return None
        return "Invalid %s: %s" % (rule["enum"], value)
    return None


class TableModel(Model):
    """validation.Model of a table class, plus what pydantic does with the table's field records:

    - keys are taken only under the names upstream accepts: a field's `accepted_names` when the table
      lists them (an alias without populate_by_name: the bare field name is an unknown key), else its
      name and its `aliases`; values come back under the field names;
    - a field's `value_rule` fails like upstream's field validator ("Value error, Invalid LoadFormat: x").
    """

    def __init__(self, name, checks=(), extra="forbid"):
        super().__init__(name, {}, checks=checks, extra=extra)
        self.accepted = {}  # input key -> field name
        self.rules = {}  # field name -> value_rule

    def validate(self, data, loc=()):
        if not isinstance(data, dict):
            return super().validate(data, loc)
        known, errors = {}, []
        for key, value in data.items():
            name = self.accepted.get(key)
            if name is None and key in self.fields:  # the field name itself, where upstream takes only aliases
                if self.extra == "forbid":
                    errors.append(dict(loc=loc + (key,), msg="Extra inputs are not permitted",
                                       type="extra_forbidden", input=value))
                continue
            problem = value_rule_problem(self.rules[name], value) if name in self.rules else None
            if problem:
                errors.append(dict(loc=loc + (key,), msg="Value error, " + problem, type="value_error", input=value))
                continue
            known[name or key] = value  # an unknown key goes on as it is: Model reports or ignores it
        values, more = super().validate(known, loc)
        if errors:  # pydantic runs the model validators only when every field validated
            more = [e for e in more if e["loc"] != loc]
        return values, errors + more


def _field(table, ty, default, models, checks, defaults):
    """validation.Field for a table type (unions reduced to what the emulator's validator knows)."""
    opts = ty["options"] if ty["kind"] == "union" else [ty]
    real = [o for o in opts if o["kind"] != "none"]
    kinds = set(o["kind"] for o in real)
    if len(real) == 1:
        one = real[0]
        if one["kind"] in ("bool", "int", "float", "str", "dict"):
            return Field(one["kind"], default)
        if one["kind"] == "path":
            return Field("str", default)
        if one["kind"] == "literal":
            return Field("literal", default, choices=tuple(one["values"]))
        if one["kind"] == "enum":
            return Field("literal", default, choices=tuple(table["enums"].get(one["name"], ())))
        if one["kind"] == "list":
            item = _field(table, one["item"], None, models, checks, defaults)
            return Field("list", default, item=item if item.kind != "any" else None)
        if one["kind"] == "class":
            return Field("model", default, model=class_model(table, one["name"], checks, defaults, models))
    if kinds <= {"str", "path"}:
        return Field("str", default)
    if kinds == {"int", "float"}:
        return Field("float", default)
    return Field("any", default)


def class_model(table, name, checks=None, defaults=None, models=None):
    """TableModel of one table class and the classes it nests.

    `checks` maps class name -> model-level checks; `defaults` maps field name -> the default to use
    where the table records none."""
    models = {} if models is None else models
    if name in models:
        return models[name]
    entry = table["classes"][name]
    model = TableModel(name, checks=(checks or {}).get(name, ()), extra="forbid" if entry["extra"] == "forbid"
                       else "ignore")
    models[name] = model
    for fname, spec in entry["fields"].items():
        default = spec["default"] if "default" in spec else (defaults or {}).get(fname)
        field = _field(table, spec["type"], default, models, checks, defaults)
        bounds = spec.get("bounds") or {}
        if field.kind in ("int", "float"):
            field.ge, field.gt, field.le = bounds.get("ge"), bounds.get("gt"), bounds.get("le")
        field.required = bool(spec.get("required")) and name != table["root"]
        model.fields[fname] = field
        for key in spec.get("accepted_names") or [fname] + spec.get("aliases", []):
            model.accepted[key] = fname
        if spec.get("value_rule"):
            model.rules[fname] = spec["value_rule"]
    return model


def dispatch(table, field="TorchLlmArgs.speculative_config"):
    return table.get("dispatch", {}).get(field)
