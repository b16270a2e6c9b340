"""A small validator that reports errors the way pydantic v2 does (the engines use pydantic).

Only what the emulator needs: strict models (extra keys forbidden), scalar types with pydantic's
lax coercions, literals, numeric bounds, nested models, and model-level checks that raise
"Value error, ..." like a pydantic `model_validator`.
"""

PYDANTIC_DOCS = "https://errors.pydantic.dev/2.11/v/"


class ValidationError(Exception):
    """Formats like `pydantic_core._pydantic_core.ValidationError`."""

    qualname = "pydantic_core._pydantic_core.ValidationError"

    def __init__(self, title, errors):
        self.title = title
        self.errors = errors  # list of dicts: loc (tuple), msg, type, input
        super().__init__(self.render())

    def render(self):
        n = len(self.errors)
        lines = ["%d validation error%s for %s" % (n, "" if n == 1 else "s", self.title)]
        for err in self.errors:
            if err["loc"]:
                lines.append(".".join(str(p) for p in err["loc"]))
            extra = ""
            if err["type"] != "missing" or err.get("input") is not _MISSING:
                value = err.get("input")
                extra = ", input_value=%s, input_type=%s" % (_short_repr(value), type(value).__name__)
            lines.append("  %s [type=%s%s]" % (err["msg"], err["type"], extra))
            lines.append("    For further information visit %s%s" % (PYDANTIC_DOCS, err["type"]))
        return "\n".join(lines)


_MISSING = object()


def _short_repr(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:38] + "..." + text[-38:]


class Field:
    """kind: bool | int | float | str | list | dict | any | literal | model."""

    def __init__(self, kind, default=None, optional=True, required=False, choices=None,
                 model=None, ge=None, gt=None, le=None, item=None):
        self.kind = kind
        self.default = default
        self.optional = optional
        self.required = required
        self.choices = choices
        self.model = model
        self.ge, self.gt, self.le = ge, gt, le
        self.item = item


class Model:
    def __init__(self, name, fields, checks=(), extra="forbid"):
        self.name = name
        self.fields = dict(fields)
        self.checks = list(checks)  # callables(values) -> error message or None
        self.extra = extra

    def validate(self, data, loc=()):
        """Return (values, errors). values: input merged over defaults."""
        errors = []
        if not isinstance(data, dict):
            errors.append(dict(loc=loc, msg="Input should be a valid dictionary or instance of %s" % self.name,
                               type="model_type", input=data))
            return {}, errors
        values = {k: f.default for k, f in self.fields.items()}
        for key, value in data.items():
            field = self.fields.get(key)
            if field is None:
                if self.extra == "forbid":
                    errors.append(dict(loc=loc + (key,), msg="Extra inputs are not permitted",
                                       type="extra_forbidden", input=value))
                continue
            value, ferrs = coerce(field, value, loc + (key,))
            errors.extend(ferrs)
            values[key] = value
        for key, field in self.fields.items():
            if field.required and key not in data:
                errors.append(dict(loc=loc + (key,), msg="Field required", type="missing", input=data))
        if not errors:
            for check in self.checks:
                msg = check(values)
                if msg:
                    errors.append(dict(loc=loc, msg="Value error, " + msg, type="value_error", input=data))
                    break
        return values, errors

    def parse(self, data):
        values, errors = self.validate(data)
        if errors:
            raise ValidationError(self.name, errors)
        return values


def _err(loc, msg, typ, value):
    return [dict(loc=loc, msg=msg, type=typ, input=value)]


def coerce(field, value, loc):
    if value is None:
        if field.optional:
            return None, []
        return value, _err(loc, "Input should be a valid %s" % _KIND_WORD.get(field.kind, field.kind),
                           "%s_type" % field.kind, value)
    kind = field.kind
    if kind == "any":
        return value, []
    if kind == "bool":
        if isinstance(value, bool):
            return value, []
        if isinstance(value, int) and value in (0, 1):
            return bool(value), []
        if isinstance(value, str):
            low = value.lower()
            if low in ("true", "yes", "on", "1", "t", "y"):
                return True, []
            if low in ("false", "no", "off", "0", "f", "n"):
                return False, []
            return value, _err(loc, "Input should be a valid boolean, unable to interpret input",
                               "bool_parsing", value)
        return value, _err(loc, "Input should be a valid boolean", "bool_type", value)
    if kind in ("int", "float"):
        number, errs = _number(kind, value, loc)
        if errs:
            return value, errs
        if field.ge is not None and number < field.ge:
            return value, _err(loc, "Input should be greater than or equal to %s" % field.ge,
                               "greater_than_equal", value)
        if field.gt is not None and number <= field.gt:
            return value, _err(loc, "Input should be greater than %s" % field.gt, "greater_than", value)
        if field.le is not None and number > field.le:
            return value, _err(loc, "Input should be less than or equal to %s" % field.le,
                               "less_than_equal", value)
        return number, []
    if kind == "str":
        if isinstance(value, str):
            return value, []
        return value, _err(loc, "Input should be a valid string", "string_type", value)
    if kind == "literal":
        if value in field.choices:
            return value, []
        words = ["%r" % c for c in field.choices]
        text = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
        return value, _err(loc, "Input should be %s" % text, "literal_error", value)
    if kind == "list":
        if not isinstance(value, (list, tuple)):
            return value, _err(loc, "Input should be a valid list", "list_type", value)
        if field.item is None:
            return list(value), []
        out, errs = [], []
        for i, item in enumerate(value):
            v, e = coerce(field.item, item, loc + (i,))
            out.append(v)
            errs.extend(e)
        return out, errs
    if kind == "dict":
        if isinstance(value, dict):
            return value, []
        return value, _err(loc, "Input should be a valid dictionary", "dict_type", value)
    if kind == "model":
        return field.model.validate(value, loc)
    raise AssertionError("unknown field kind %r" % kind)


_KIND_WORD = {"bool": "boolean", "int": "integer", "float": "number", "str": "string",
              "list": "list", "dict": "dictionary"}


def _number(kind, value, loc):
    if isinstance(value, bool):
        return int(value), []
    if isinstance(value, int):
        return (value if kind == "int" else float(value)), []
    if isinstance(value, float):
        if kind == "float":
            return value, []
        if value.is_integer():
            return int(value), []
        return value, _err(loc, "Input should be a valid integer, got a number with a fractional part",
                           "int_from_float", value)
    if isinstance(value, str):
        try:
            return (int(value.strip()) if kind == "int" else float(value.strip())), []
        except ValueError:
            if kind == "int":
                return value, _err(loc, "Input should be a valid integer, unable to parse string as an integer",
                                   "int_parsing", value)
            return value, _err(loc, "Input should be a valid number, unable to parse string as a number",
                               "float_parsing", value)
    if kind == "int":
        return value, _err(loc, "Input should be a valid integer", "int_type", value)
    return value, _err(loc, "Input should be a valid number", "float_type", value)
