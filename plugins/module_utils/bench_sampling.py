# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the engine behind an endpoint honours a request's sampling settings (stdlib only).

EAGLE-3 on TensorRT-LLM decodes greedily: the request's ``temperature``, ``top_p``, ``top_k`` and
``seed`` are ignored (TensorRT-LLM tech blog 11, "GPT-OSS with Eagle3", 1.1.0rc0; the developer guide
says the same of speculative decoding in general). From 1.2.0rc6 the speculative config has the
prototype ``allow_advanced_sampling`` (default false), which lifts it. A benchmark that sends
``temperature > 0`` to such an engine measures greedy decoding while it claims to measure sampling,
so serve_bench and the draft sweep refuse it, or, when asked to go on, flag the result.

What serves the endpoint (the *serving* description) can be given in three shapes, all reduced by
:func:`serving_summary` to ``{engine, engine_version, speculative_method, decoding_type,
allow_advanced_sampling, stream_interval}``:

- the output of the ``specdec.serve.spec_config`` filter (``engine``, ``version``,
  ``speculative.method``, ``config`` with the engine's YAML);
- a record of the local fact ``ansible_local.specdec_serving.instances.<name>`` (``engine``,
  ``engine_version``, ``speculative_method``);
- that summary itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENGINES = ("trtllm", "vllm")

# (engine, speculative method) -> the config key of the speculative config that lifts the limit
GREEDY_ONLY = {
    ("trtllm", "eagle3"): "allow_advanced_sampling",
}

_ENGINE_TITLES = {"trtllm": "TensorRT-LLM", "vllm": "vLLM"}
_EAGLE_TYPES = ("Eagle", "Eagle3")


class SamplingError(ValueError):
    """A serving description that cannot be read."""


def _text(value, what):
    if value is None:
        return None
    if not isinstance(value, str):
        raise SamplingError("serving.%s must be a string, got %r" % (what, value))
    return value


def _flag(value, what):
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        return value.lower() in ("true", "yes", "on", "1")
    raise SamplingError("serving.%s must be a boolean, got %r" % (what, value))


def serving_summary(serving):
    """Reduce a serving description (see the module docstring) to the keys the checks read.

    Returns None for None or an empty mapping (nothing is known about the engine).
    """
    if serving is None or serving == {}:
        return None
    if not isinstance(serving, dict):
        raise SamplingError("serving must be a mapping, got %s" % type(serving).__name__)
    engine = _text(serving.get("engine"), "engine")
    if engine not in ENGINES:
        raise SamplingError("serving.engine must be one of %s, got %r" % (", ".join(ENGINES), engine))
    version = _text(serving.get("engine_version", serving.get("version")), "engine_version")
    spec = serving.get("speculative")
    method = serving.get("speculative_method")
    if method is None and isinstance(spec, dict):
        method = spec.get("method")
    method = _text(method, "speculative_method") or "none"
    config = serving.get("config")
    if not isinstance(config, dict):
        config = {}
    spec_cfg = config.get("speculative_config")
    if not isinstance(spec_cfg, dict):
        spec_cfg = {}
    decoding_type = _text(serving.get("decoding_type", spec_cfg.get("decoding_type")), "decoding_type")
    if engine == "trtllm" and decoding_type in _EAGLE_TYPES:
        method = "eagle3"  # Eagle (to 1.2.x) and Eagle3 (from 1.3) both run EAGLE-3 drafts
    advanced = _flag(serving.get("allow_advanced_sampling", spec_cfg.get("allow_advanced_sampling")),
                     "allow_advanced_sampling")
    interval = serving.get("stream_interval", config.get("stream_interval"))
    if interval is None:
        interval = 1
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise SamplingError("serving.stream_interval must be an integer >= 1, got %r" % (interval,))
    return {"engine": engine, "engine_version": version, "speculative_method": method,
            "decoding_type": decoding_type, "allow_advanced_sampling": advanced,
            "stream_interval": interval}


def describe(summary):
    """'eagle3 on TensorRT-LLM 1.2.0rc6' for a serving summary."""
    title = _ENGINE_TITLES.get(summary["engine"], summary["engine"])
    if summary.get("engine_version"):
        title = "%s %s" % (title, summary["engine_version"])
    return "%s on %s" % (summary["speculative_method"], title)


def check_sampling(serving, temperature, allow_greedy_fallback=False,
                   temperature_setting="temperature", fallback_setting="allow_greedy_fallback"):
    """Decide whether a benchmark at ``temperature`` measures what it asks for on ``serving``.

    Returns a JSON-serialisable dict:

    - ``checked``: whether the engine was known (a None ``serving`` checks nothing);
    - ``serving``: the summary, or None;
    - ``greedy_only``: the engine decodes greedily whatever the request asks;
    - ``temperature``: the requested temperature;
    - ``honoured``: False when the request asks for sampling that the engine ignores;
    - ``reason``: why the engine is greedy-only (None otherwise);
    - ``error``: the message to fail with (sampling asked for, greedy-only engine, no fallback allowed);
    - ``warning``: the flag to carry in results and reports when the fallback was allowed.
    """
    try:
        temp = float(temperature)
    except (TypeError, ValueError):
        raise SamplingError("%s must be a number, got %r" % (temperature_setting, temperature))
    if temp < 0:
        raise SamplingError("%s must be >= 0, got %r" % (temperature_setting, temperature))
    summary = serving_summary(serving)
    out = {"checked": summary is not None, "serving": summary, "greedy_only": False,
           "temperature": temp, "honoured": True, "reason": None, "error": None, "warning": None}
    if summary is None:
        return out
    lift = GREEDY_ONLY.get((summary["engine"], summary["speculative_method"]))
    if lift is None or summary.get(lift):
        return out
    out["greedy_only"] = True
    out["reason"] = ("%s decodes greedily: a request's temperature, top_p, top_k and seed are ignored"
                     % describe(summary))
    if temp == 0:
        return out
    out["honoured"] = False
    if allow_greedy_fallback:
        out["warning"] = ("%s=%s is not honoured: %s, so these figures are of greedy decoding "
                          "(measured anyway: %s is true)"
                          % (temperature_setting, _num(temp), out["reason"], fallback_setting))
        return out
    out["error"] = ("%s=%s is not allowed here: %s. Allowed: %s=0 (greedy, what the engine does); or "
                    "speculative_config.allow_advanced_sampling: true (the instance's speculative.options or "
                    "llm_api_options; TensorRT-LLM 1.2.0rc6 and later, a prototype); or %s=true to measure greedy "
                    "decoding anyway, flagged in the results."
                    % (temperature_setting, _num(temp), out["reason"], temperature_setting, fallback_setting))
    return out


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serving_from_fact(fact, host, port):
    """The record of ``ansible_local.specdec_serving`` (``{"instances": {name: record}}``) for the
    instance that listens on ``port``, when ``host`` is this host (loopback); None when there is no
    such instance, or more than one."""
    if host not in LOOPBACK or not isinstance(fact, dict):
        return None
    instances = fact.get("instances")
    if not isinstance(instances, dict):
        return None
    found = [rec for rec in instances.values()
             if isinstance(rec, dict) and str(rec.get("port")) == str(port)]
    return found[0] if len(found) == 1 else None


def _num(value):
    return ("%g" % value) if isinstance(value, float) else str(value)
