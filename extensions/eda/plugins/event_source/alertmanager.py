# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""specdec.serve.alertmanager: an ansible-rulebook event source that receives Alertmanager's webhook.

Alertmanager POSTs a JSON payload (version 4) per alert group; this source checks it and puts one event per
alert on the rulebook's queue: ``{"alert": {...}, "receiver": ..., "groupKey": ..., "meta": {...}}``. It
listens only on the address it is given (no default), and, with a ``token``, answers only requests that carry
``Authorization: Bearer <token>``. The token is never logged, and no request header reaches an event.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from typing import Any

from aiohttp import web

DOCUMENTATION = r"""
---
short_description: Receive Alertmanager's webhook (payload version 4), one event per alert
description:
  - An ansible-rulebook event source that runs an HTTP server for Alertmanager's webhook receiver
    (webhook_configs) and puts one event per alert of each notification on the rulebook's queue.
  - Each event is C(alert) (the alert as Alertmanager sends it, with C(status), C(labels), C(annotations),
    C(startsAt), C(endsAt), C(generatorURL) and C(fingerprint)), C(receiver) and C(groupKey) (of the
    notification) and C(meta) (C(endpoint), the path the notification came to).
  - A body that is not JSON, or not an Alertmanager payload of version 4, is answered 400 with what is wrong;
    with O(token), a request without that bearer token is answered 401. Accepted notifications are answered
    202.
  - Request headers never reach an event (an event reaches the playbooks the rulebook runs), and the token is
    never logged.
options:
  host:
    description:
      - The address to listen on, one the inventory names (the EDA host's address on the monitoring network,
        or 127.0.0.1 when Alertmanager runs on the same host). Required; there is no default.
      - 0.0.0.0 or :: listens on every interface; give a O(token) and a firewall rule with it.
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
      - Not given, any client that reaches the address may post alerts.
    type: str
"""

EXAMPLES = r"""
- name: Re-tune a host when speculation stops paying
  hosts: all
  sources:
    - specdec.serve.alertmanager:
        host: 10.0.8.5
        port: 5050
        data_path: /alerts
        token: "{{ retune_listen_token }}"
  rules:
    - name: Show each alert
      condition: event.alert.status == "firing"
      action:
        print_event:
"""

LOG = logging.getLogger("specdec.serve.alertmanager")
ARGS = ("host", "port", "data_path", "token")
DEFAULT_PORT = 5050
DEFAULT_PATH = "/alerts"
STATUSES = ("firing", "resolved")


class PayloadError(ValueError):
    """What is wrong with a webhook payload (answered 400 with this text)."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def settings(args: dict[str, Any]) -> dict[str, Any]:
    """The source's arguments, checked: host, port, data_path and token (None when not given). A refusal
    names the argument and what is allowed, and never shows the token."""
    unknown = sorted(k for k in args if k not in ARGS and not str(k).startswith("eda_"))
    if unknown:
        raise ValueError("specdec.serve.alertmanager: unknown argument %s (known: %s)" % (", ".join(unknown), ", ".join(ARGS)))
    host = args.get("host")
    if not isinstance(host, str) or not host.strip() or any(c.isspace() for c in host):
        raise ValueError("specdec.serve.alertmanager: host: %s must be the address to listen on, one the inventory names "
                         "(there is no default)" % _show(host))
    port = args.get("port", DEFAULT_PORT)
    if isinstance(port, str) and port.strip().isdigit():
        port = int(port.strip())
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise ValueError("specdec.serve.alertmanager: port: %s must be a port number from 1 to 65535" % _show(port))
    path = args.get("data_path", DEFAULT_PATH)
    if not isinstance(path, str) or not path.startswith("/") or any(c.isspace() or ord(c) < 32 for c in path):
        raise ValueError("specdec.serve.alertmanager: data_path: %s must be a URL path starting with /" % _show(path))
    token = args.get("token")
    if token is not None and (not isinstance(token, str) or not token or any(c.isspace() for c in token)):
        raise ValueError("specdec.serve.alertmanager: token: (value hidden) must be a non-empty string without spaces; "
                         "leave it out for no token")
    return {"host": host.strip(), "port": port, "data_path": path, "token": token}


def _labels(where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise PayloadError("%s: %s must be an object of strings" % (where, _show(value)))
    return value


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


def _authorized(request: web.Request, token: str | None) -> bool:
    if token is None:
        return True
    given = request.headers.get("Authorization", "")
    scheme, dummy, credentials = given.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.strip().encode("utf-8"), token.encode("utf-8"))


def application(queue: asyncio.Queue[Any], s: dict[str, Any]) -> web.Application:
    """The web application: POST s["data_path"] receives the webhook; the events go to `queue`."""

    async def receive(request: web.Request) -> web.Response:
        if not _authorized(request, s["token"]):
            LOG.warning("refused a notification from %s: no bearer token, or not the one configured", request.remote)
            return web.Response(status=401, text="a bearer token is required (Authorization: Bearer ...)\n",
                                headers={"WWW-Authenticate": "Bearer"})
        body = await request.read()
        try:
            payload = json.loads(body)
        except ValueError as exc:
            LOG.warning("refused a notification from %s: the body is not JSON (%s)", request.remote, exc)
            return web.Response(status=400, text="the body is not JSON: %s\n" % exc)
        try:
            found, notification = alerts(payload)
        except PayloadError as exc:
            LOG.warning("refused a notification from %s: %s", request.remote, exc)
            return web.Response(status=400, text="not an Alertmanager webhook payload: %s\n" % exc)
        for alert in found:
            event = {"alert": alert, "meta": {"endpoint": s["data_path"]}}
            event.update(notification)
            await queue.put(event)
        LOG.info("received %d alert(s) from %s for receiver %s", len(found), request.remote, notification["receiver"])
        return web.Response(status=202, text="received %d alert(s)\n" % len(found))

    app = web.Application()
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
        LOG.info("listening on %s:%d%s%s", s["host"], s["port"], s["data_path"],
                 " (bearer token required)" if s["token"] else "")
        await asyncio.Future()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    # By hand: python alertmanager.py HOST [PORT], printing each event.

    class _PrintQueue(asyncio.Queue[Any]):
        async def put(self, item: Any) -> None:
            print(json.dumps(item))

    import sys

    logging.basicConfig(level=logging.INFO)
    asyncio.run(main(_PrintQueue(), {"host": sys.argv[1], "port": int(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_PORT}))
