# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""specdec.serve.alertmanager: an ansible-rulebook event source that receives Alertmanager's webhook.

Alertmanager POSTs a JSON payload (version 4) per alert group; this source checks it and puts one event per
alert on the rulebook's queue: ``{"alert": {...}, "receiver": ..., "groupKey": ..., "meta": {...}}``. It
listens only on the address it is given (no default) and answers only requests that carry ``Authorization:
Bearer <token>`` (a token is required). The token is never logged, and no request header reaches an event.

What reaches a playbook from here is hostile until checked, so an event is data only: an alert reaches the queue
only when its name is one of ``alertnames`` and each of its ``labels`` is a plain name (letters, digits, ``_ . -``:
what the inventory's host and instance names are), and only those labels travel with it (no annotation, no free
text). At most ``max_alerts`` alerts of one notification are taken; an alert already taken (the same fingerprint,
start and status) is dropped; a body over ``max_body`` bytes is answered 413, one nested deeper than an
Alertmanager payload is (``max_depth``) 400, never a traceback.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import json
import logging
import re
from typing import Any

from aiohttp import web

DOCUMENTATION = r"""
---
short_description: Receive Alertmanager's webhook (payload version 4), one event per alert
description:
  - An ansible-rulebook event source that runs an HTTP server for Alertmanager's webhook receiver
    (webhook_configs) and puts one event per alert of each notification on the rulebook's queue.
  - Each event is C(alert) (C(status), C(labels), C(startsAt), C(endsAt) and C(fingerprint) of the alert as
    Alertmanager sends it, its labels only C(alertname) and O(labels)), C(receiver) and C(groupKey) (of the
    notification) and C(meta) (C(endpoint), the path the notification came to).
  - A body that is not JSON, or not an Alertmanager payload of version 4, is answered 400 with what is wrong;
    a request without the bearer token (O(token) or O(token_file)) is answered 401. Accepted notifications are answered
    202.
  - Request headers never reach an event (an event reaches the playbooks the rulebook runs), and the token is
    never logged.
  - An event is data only. An alert is put on the queue only when its C(alertname) is one of O(alertnames) and
    each of O(labels) is a plain name (letters, digits and C(_ . -), starting with a letter or digit, at most 128
    characters, an inventory name); the event's C(labels) are those labels only, and it has no annotations.
    Other alerts are dropped and logged; an alert already put on the queue (the same C(fingerprint), C(startsAt)
    and C(status)) is dropped as a repeat; at most O(max_alerts) alerts of one notification are taken.
  - A body over O(max_body) bytes is answered 413; a body nested deeper than O(max_depth) levels, or not
    JSON, 400.
options:
  host:
    description:
      - The address to listen on, one the inventory names (the EDA host's address on the monitoring network,
        or 127.0.0.1 when Alertmanager runs on the same host). Required; there is no default.
      - 0.0.0.0 or :: listens on every interface; give a firewall rule with it.
    type: str
    required: true
  port:
    description: The TCP port to listen on.
    type: int
    default: 5050
  data_path:
    description: The URL path Alertmanager POSTs to (the path of the webhook URL); other paths are answered 404.
    type: str
    default: /alerts
  token:
    description:
      - A bearer token every request must carry (Alertmanager's webhook_configs http_config authorization,
        type Bearer). Compared in constant time.
      - One of O(token) and O(token_file) is required.
    type: str
  token_file:
    description:
      - A file holding the bearer token (its first line), read when the source starts; for example the systemd
        tune loop's file, which only its service's user reads (C(/etc/specdec/tune-loop/token)).
    type: path
  alertnames:
    description: The names of the alerts this source takes (the rules' names); any other alert is dropped.
    type: list
    elements: str
    default: [SpeculationStoppedPaying]
  labels:
    description: The labels each alert must carry as plain names, and the only labels its event carries
      (besides C(alertname)).
    type: list
    elements: str
    default: [host, engine_instance]
  max_alerts:
    description: The most alerts taken from one notification; the rest are dropped and logged.
    type: int
    default: 16
  max_body:
    description: The largest body accepted, in bytes; a larger one is answered 413.
    type: int
    default: 1048576
  max_depth:
    description: The deepest nesting of the body's JSON accepted (an Alertmanager payload has 4 levels).
    type: int
    default: 8
"""

EXAMPLES = r"""
- name: Re-tune a host when speculation stops paying
  hosts: all
  sources:
    - specdec.serve.alertmanager:
        host: 10.0.8.5
        port: 5050
        data_path: /alerts
        token_file: /etc/specdec/tune-loop/token
  rules:
    - name: Show each alert
      condition: event.alert.status == "firing"
      action:
        print_event:
"""

LOG = logging.getLogger("specdec.serve.alertmanager")
ARGS = ("host", "port", "data_path", "token", "token_file", "alertnames", "labels", "max_alerts", "max_body",
        "max_depth")
DEFAULT_PORT = 5050
DEFAULT_PATH = "/alerts"
DEFAULT_ALERTNAMES = ("SpeculationStoppedPaying",)
DEFAULT_LABELS = ("host", "engine_instance")
DEFAULT_MAX_ALERTS = 16
DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_MAX_DEPTH = 8
# the alerts already taken (fingerprint, start, status), oldest forgotten first
REMEMBERED = 4096
STATUSES = ("firing", "resolved")
# a plain name, as the collection's settings define one (plugin_utils/_vocabulary.py NAME_PATTERN; a unit test
# keeps the two equal): what an inventory host or an engine instance is called
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")


class PayloadError(ValueError):
    """What is wrong with a webhook payload (answered 400 with this text)."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _positive(args: dict[str, Any], key: str, default: int, most: int, what: str = "a whole number") -> int:
    value = args.get(key, default)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise ValueError("specdec.serve.alertmanager: %s: %s must be %s from 1 to %d" % (key, _show(value), what, most))
    return value


def _names(args: dict[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = args.get(key, list(default))
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) and NAME_RE.match(v) for v in value):
        raise ValueError("specdec.serve.alertmanager: %s: %s must be a non-empty list of plain names" % (key, _show(value)))
    return tuple(value)


def _read_token(path: Any) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError("specdec.serve.alertmanager: token_file: %s must be an absolute path" % _show(path))
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.readline().strip()
    except OSError as exc:
        raise ValueError("specdec.serve.alertmanager: token_file: %s cannot be read (%s)" % (_show(path), exc.strerror))
    if not token:
        raise ValueError("specdec.serve.alertmanager: token_file: %s holds no token" % _show(path))
    return token


def settings(args: dict[str, Any]) -> dict[str, Any]:
    """The source's arguments, checked: host, port, data_path, token (from token or token_file), alertnames,
    labels, max_alerts, max_body and max_depth. A refusal names the argument and what is allowed, and never
    shows the token."""
    unknown = sorted(k for k in args if k not in ARGS and not str(k).startswith("eda_"))
    if unknown:
        raise ValueError("specdec.serve.alertmanager: unknown argument %s (known: %s)" % (", ".join(unknown), ", ".join(ARGS)))
    host = args.get("host")
    if not isinstance(host, str) or not host.strip() or any(c.isspace() for c in host):
        raise ValueError("specdec.serve.alertmanager: host: %s must be the address to listen on, one the inventory names "
                         "(there is no default)" % _show(host))
    port = _positive(args, "port", DEFAULT_PORT, 65535, "a port number")
    path = args.get("data_path", DEFAULT_PATH)
    if not isinstance(path, str) or not path.startswith("/") or any(c.isspace() or ord(c) < 32 for c in path):
        raise ValueError("specdec.serve.alertmanager: data_path: %s must be a URL path starting with /" % _show(path))
    token = args.get("token")
    if token is not None and (not isinstance(token, str) or not token or any(c.isspace() for c in token)):
        raise ValueError("specdec.serve.alertmanager: token: (value hidden) must be a non-empty string without spaces")
    if args.get("token_file") is not None:
        if token is not None:
            raise ValueError("specdec.serve.alertmanager: token and token_file: give one of them, not both")
        token = _read_token(args["token_file"])
    if token is None:
        raise ValueError("specdec.serve.alertmanager: token: a bearer token is required (token or token_file): "
                         "anyone who reaches the listener could otherwise start playbooks")
    return {"host": host.strip(), "port": port, "data_path": path, "token": token,
            "alertnames": _names(args, "alertnames", DEFAULT_ALERTNAMES),
            "labels": _names(args, "labels", DEFAULT_LABELS),
            "max_alerts": _positive(args, "max_alerts", DEFAULT_MAX_ALERTS, 10000),
            "max_body": _positive(args, "max_body", DEFAULT_MAX_BODY, 64 * 1024 * 1024),
            "max_depth": _positive(args, "max_depth", DEFAULT_MAX_DEPTH, 64)}


def _labels(where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise PayloadError("%s: %s must be an object of strings" % (where, _show(value)))
    return value


def depth(value: Any) -> int:
    """How deeply a parsed JSON value nests (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            items = list(item.values())
        elif isinstance(item, list):
            items = item
        else:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
        stack.extend((child, level + 1) for child in items)
    return deepest


def alerts(payload: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The alerts of an Alertmanager webhook payload (version 4) and its notification fields (receiver,
    groupKey), checked; raises PayloadError with what is wrong."""
    if not isinstance(payload, dict):
        raise PayloadError("the body must be a JSON object (Alertmanager's webhook payload), got %s" % type(payload).__name__)
    if payload.get("version") != "4":
        raise PayloadError("version: %s is not an Alertmanager webhook payload of version \"4\"" % _show(payload.get("version")))
    for key in ("receiver", "groupKey"):
        if not isinstance(payload.get(key), str):
            raise PayloadError("%s: %s must be a string" % (key, _show(payload.get(key))))
    found = payload.get("alerts")
    if not isinstance(found, list):
        raise PayloadError("alerts: %s must be a list of alerts" % _show(found))
    out = []
    for i, alert in enumerate(found):
        where = "alerts[%d]" % i
        if not isinstance(alert, dict):
            raise PayloadError("%s: %s must be an object" % (where, _show(alert)))
        if alert.get("status") not in STATUSES:
            raise PayloadError("%s.status: %s must be firing or resolved" % (where, _show(alert.get("status"))))
        _labels(where + ".labels", alert.get("labels"))
        _labels(where + ".annotations", alert.get("annotations", {}))
        for key in ("startsAt", "endsAt", "generatorURL", "fingerprint"):
            if key in alert and not isinstance(alert[key], str):
                raise PayloadError("%s.%s: %s must be a string" % (where, key, _show(alert[key])))
        out.append(dict(alert))
    return out, {"receiver": payload["receiver"], "groupKey": payload["groupKey"]}


def as_data(alert: dict[str, Any], s: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(the event's alert, None) for an alert this source takes: its status, its name and ``labels`` (each a plain
    name), its fingerprint and times; (None, why) for one it drops."""
    labels = alert["labels"]
    name = labels.get("alertname")
    if name not in s["alertnames"]:
        return None, "alertname %s is not one of %s" % (_show(name), ", ".join(s["alertnames"]))
    for key in s["labels"]:
        if not isinstance(labels.get(key), str) or not NAME_RE.match(labels[key]):
            return None, "label %s: %s is not a plain name (letters, digits, _ . -)" % (key, _show(labels.get(key)))
    kept = {"alertname": name}
    kept.update((key, labels[key]) for key in s["labels"])
    data = {"status": alert["status"], "labels": kept}
    for key in ("fingerprint", "startsAt", "endsAt"):
        if isinstance(alert.get(key), str) and len(alert[key]) <= 64:
            data[key] = alert[key]
    return data, None


class Seen:
    """The alerts already taken, by fingerprint (or labels), start and status; the oldest forgotten first."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self.size = size
        self.keys: collections.OrderedDict[tuple[str, ...], None] = collections.OrderedDict()

    def add(self, alert: dict[str, Any]) -> bool:
        """Remember the alert; False when it was already taken."""
        who = alert.get("fingerprint") or json.dumps(alert["labels"], sort_keys=True)
        key = (who, alert.get("startsAt") or "", alert["status"])
        if key in self.keys:
            return False
        self.keys[key] = None
        while len(self.keys) > self.size:
            self.keys.popitem(last=False)
        return True


def _authorized(request: web.Request, token: str | None) -> bool:
    if token is None:
        return False
    given = request.headers.get("Authorization", "")
    scheme, dummy, credentials = given.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.strip().encode("utf-8"), token.encode("utf-8"))


def application(queue: asyncio.Queue[Any], s: dict[str, Any]) -> web.Application:
    """The web application: POST s["data_path"] receives the webhook; the events go to `queue`."""
    seen = Seen()

    async def receive(request: web.Request) -> web.Response:
        if not _authorized(request, s["token"]):
            LOG.warning("refused a notification from %s: no bearer token, or not the one configured", request.remote)
            return web.Response(status=401, text="a bearer token is required (Authorization: Bearer ...)\n",
                                headers={"WWW-Authenticate": "Bearer"})
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            LOG.warning("refused a notification from %s: its body is over %d bytes", request.remote, s["max_body"])
            return web.Response(status=413, text="the body is over %d bytes\n" % s["max_body"])
        try:
            payload = json.loads(body)
        except RecursionError:
            LOG.warning("refused a notification from %s: its JSON nests too deeply", request.remote)
            return web.Response(status=400, text="the body nests deeper than %d levels\n" % s["max_depth"])
        except ValueError as exc:
            LOG.warning("refused a notification from %s: the body is not JSON (%s)", request.remote, exc)
            return web.Response(status=400, text="the body is not JSON: %s\n" % exc)
        if depth(payload) > s["max_depth"]:
            LOG.warning("refused a notification from %s: its JSON nests deeper than %d levels", request.remote, s["max_depth"])
            return web.Response(status=400, text="the body nests deeper than %d levels\n" % s["max_depth"])
        try:
            found, notification = alerts(payload)
        except PayloadError as exc:
            LOG.warning("refused a notification from %s: %s", request.remote, exc)
            return web.Response(status=400, text="not an Alertmanager webhook payload: %s\n" % exc)
        taken = dropped = repeats = capped = 0
        for alert in found:
            data, why = as_data(alert, s)
            if data is None:
                dropped += 1
                LOG.warning("dropped an alert from %s: %s", request.remote, why)
                continue
            if taken >= s["max_alerts"]:
                capped += 1
                continue
            if not seen.add(data):
                repeats += 1
                continue
            event = {"alert": data, "meta": {"endpoint": s["data_path"]}}
            event.update(notification)
            await queue.put(event)
            taken += 1
        if capped:
            LOG.warning("took %d alert(s) of one notification from %s and dropped %d more (max_alerts)",
                        s["max_alerts"], request.remote, capped)
        LOG.info("received %d alert(s) from %s for receiver %s: %d taken, %d dropped, %d repeated, %d over the cap",
                 len(found), request.remote, notification["receiver"], taken, dropped, repeats, capped)
        return web.Response(status=202, text="received %d alert(s): %d taken, %d dropped, %d repeated, %d over the cap\n"
                            % (len(found), taken, dropped, repeats, capped))

    app = web.Application(client_max_size=s["max_body"])
    app.router.add_post(s["data_path"], receive)
    return app


async def main(queue: asyncio.Queue[Any], args: dict[str, Any]) -> None:
    """Listen on args["host"]:args["port"] until cancelled, putting one event per received alert on `queue`."""
    s = settings(args)
    runner = web.AppRunner(application(queue, s), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, s["host"], s["port"])
        await site.start()
        LOG.info("listening on %s:%d%s (bearer token required)", s["host"], s["port"], s["data_path"])
        await asyncio.Future()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    # By hand: python alertmanager.py HOST PORT TOKEN_FILE, printing each event.

    class _PrintQueue(asyncio.Queue[Any]):
        async def put(self, item: Any) -> None:
            print(json.dumps(item))

    import sys

    logging.basicConfig(level=logging.INFO)
    asyncio.run(main(_PrintQueue(), {"host": sys.argv[1], "port": int(sys.argv[2]), "token_file": sys.argv[3]}))
