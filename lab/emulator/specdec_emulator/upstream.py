"""TensorRT-LLM schemas from the generated engine tables (the same JSON files spec_config reads).

The tables are written by `scripts/engine_tables.py` from upstream `llm_args.py` and live in
`plugins/plugin_utils/engine_tables/`. In the emulator image they are copied next to this package
(`specdec_emulator/engine_tables/`); in a checkout they are found at their place in the repository.
`SPECDEC_EMU_TABLES` overrides both. A version without a table keeps the hand-written models of
trtllm_args.py.
"""

import json
import os
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
    """The table for an emulated TensorRT-LLM version: its own, or the newest of a 1.3 release."""
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
        _CACHE[key] = json.loads((folder / rows[name]["file"]).read_text()) if name else None
    return _CACHE[key]


def _field(table, ty, default, models, checks):
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
            item = _field(table, one["item"], None, models, checks)
            return Field("list", default, item=item if item.kind != "any" else None)
        if one["kind"] == "class":
            return Field("model", default, model=class_model(table, one["name"], models, checks))
    if kinds <= {"str", "path"}:
        return Field("str", default)
    if kinds == {"int", "float"}:
        return Field("float", default)
    return Field("any", default)


def class_model(table, name, models=None, checks=None, hand_defaults=None):
    """validation.Model of one table class; `checks` maps class name -> model-level checks."""
    models = {} if models is None else models
    checks = checks or {}
    if name in models:
        return models[name]
    entry = table["classes"][name]
    fields = {}
    model = Model(name, fields, checks=checks.get(name, ()), extra="forbid" if entry["extra"] == "forbid" else "ignore")
    models[name] = model
    for fname, spec in entry["fields"].items():
        default = (hand_defaults or {}).get(fname, spec.get("default"))
        field = _field(table, spec["type"], default, models, checks)
        bounds = spec.get("bounds") or {}
        if field.kind in ("int", "float"):
            field.ge, field.gt, field.le = bounds.get("ge"), bounds.get("gt"), bounds.get("le")
        field.required = bool(spec.get("required")) and name != table["root"]
        fields[fname] = field
    model.fields.update(fields)
    model.aliases = dict((alias, fname) for fname, spec in entry["fields"].items() for alias in spec.get("aliases", []))
    return model


def unalias(model, data):
    """Input keys renamed from their aliases to the field names (pydantic's validation_alias)."""
    aliases = getattr(model, "aliases", {})
    if not isinstance(data, dict) or not aliases:
        return data
    return dict((aliases.get(k, k), v) for k, v in data.items())


def dispatch(table, field="TorchLlmArgs.speculative_config"):
    return table.get("dispatch", {}).get(field)
