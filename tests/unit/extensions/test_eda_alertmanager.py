# -*- coding: utf-8 -*-
"""The event source specdec.serve.alertmanager (extensions/eda/plugins/event_source/alertmanager.py), loaded the
way ansible-rulebook loads a source (runpy.run_path) and run for real: its aiohttp server on 127.0.0.1, a free
port, and Alertmanager's webhook payload (version 4) POSTed to it with aiohttp's client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import runpy
import socket
from pathlib import Path

import aiohttp
import pytest

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "extensions" / "eda" / "plugins" / "event_source" / "alertmanager.py"
PLUGIN = runpy.run_path(str(SOURCE))
TOKEN = "tok-5550177-do-not-print"


def alert(host, instance, status="firing", fingerprint="a1b2c3d4e5f60718"):
    return {
        "status": status,
        "labels": {"alertname": "SpeculationStoppedPaying", "host": host, "engine_instance": instance,
                   "severity": "warning"},
        "annotations": {"summary": "Speculation stopped paying on %s/%s" % (host, instance),
                        "description": "Live acceptance length over 10m is below 0.8 of what the sweep measured."},
        "startsAt": "2026-09-01T10:00:00.000Z",
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-09-01T11:00:00.000Z",
        "generatorURL": "http://10.0.8.1:9090/graph?g0.expr=specdec%3Aacceptance_length%3Arate",
        "fingerprint": fingerprint,
    }


def payload(*alerts, status="firing"):
    """A notification as Alertmanager 0.27 sends it to a webhook_configs receiver."""
    return {
        "version": "4",
        "groupKey": '{}:{alertname="SpeculationStoppedPaying", engine_instance="gpt-oss-120b", host="spark-01"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "specdec",
        "groupLabels": {"alertname": "SpeculationStoppedPaying"},
        "commonLabels": {"alertname": "SpeculationStoppedPaying", "severity": "warning"},
        "commonAnnotations": {},
        "externalURL": "http://10.0.8.1:9093",
        "alerts": list(alerts),
    }


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.asynccontextmanager
async def source(**args):
    """main() running as ansible-rulebook runs it (a task fed a queue), until the block ends: (queue, url)."""
    args = dict({"host": "127.0.0.1", "port": free_port(), "token": TOKEN}, **args)
    queue: asyncio.Queue = asyncio.Queue()
    task = asyncio.create_task(PLUGIN["main"](queue, args))
    for _ in range(200):
        if task.done():
            task.result()  # raises what main raised
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", args["port"])
            writer.close()
            break
        except OSError:
            await asyncio.sleep(0.02)
    try:
        yield queue, "http://127.0.0.1:%d%s" % (args["port"], args.get("data_path", "/alerts"))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


AUTH = {"Authorization": "Bearer " + TOKEN}


async def post(url, body, headers=None):
    async with aiohttp.ClientSession() as session:
        data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        headers = AUTH if headers is None else headers
        async with session.post(url, data=data, headers=dict({"Content-Type": "application/json"}, **headers)) as r:
            return r.status, await r.text()


def drain(queue):
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


def test_two_alerts_of_a_notification_are_two_events_with_their_labels():
    async def run():
        async with source() as (queue, url):
            status, text = await post(url, payload(alert("spark-01", "gpt-oss-120b"),
                                                   alert("spark-02", "gpt-oss-120b", "resolved", "0f1e2d3c4b5a6978")))
            return status, text, drain(queue)

    status, text, events = asyncio.run(run())
    assert status == 202, text
    assert len(events) == 2
    first, second = events
    # data only: the rules' labels, no other label, no annotation, no URL
    assert first["alert"] == {"status": "firing", "fingerprint": "a1b2c3d4e5f60718", "startsAt": "2026-09-01T10:00:00.000Z",
                              "endsAt": "0001-01-01T00:00:00Z",
                              "labels": {"alertname": "SpeculationStoppedPaying", "host": "spark-01",
                                         "engine_instance": "gpt-oss-120b"}}
    assert second["alert"]["labels"]["host"] == "spark-02" and second["alert"]["status"] == "resolved"
    for event in events:
        assert event["receiver"] == "specdec"
        assert event["groupKey"].startswith("{}:{alertname=")
        assert event["meta"] == {"endpoint": "/alerts"}
        # no meta.hosts: ansible-rulebook would make it the playbook's --limit, and the retune play runs on localhost
        assert "hosts" not in event["meta"]


def test_the_token_is_required_and_compared_exactly(caplog):
    caplog.set_level(logging.DEBUG)

    async def run():
        async with source() as (queue, url):
            body = payload(alert("spark-01", "gpt-oss-120b"))
            results = {
                "none": await post(url, body, {}),
                "wrong": await post(url, body, {"Authorization": "Bearer " + TOKEN[:-1] + "X"}),
                "basic": await post(url, body, {"Authorization": "Basic " + TOKEN}),
                "prefix": await post(url, body, {"Authorization": "Bearer " + TOKEN[:-2]}),
            }
            refused = drain(queue)
            results["right"] = await post(url, body, {"Authorization": "Bearer " + TOKEN})
            return results, refused, drain(queue)

    results, refused, accepted = asyncio.run(run())
    for case in ("none", "wrong", "basic", "prefix"):
        assert results[case][0] == 401, (case, results[case])
    assert refused == []
    assert results["right"][0] == 202
    assert [e["alert"]["labels"]["host"] for e in accepted] == ["spark-01"]
    # no header reaches an event: the token would reach the playbook's extra vars
    assert TOKEN not in json.dumps(accepted)
    assert "refused a notification" in caplog.text and "listening on 127.0.0.1" in caplog.text
    assert TOKEN not in caplog.text
    assert TOKEN[:-2] not in caplog.text


@pytest.mark.parametrize("body, says", [
    (b"{not json", "the body is not JSON"),
    (b"\xff\xfe", "the body is not JSON"),
    (json.dumps([1, 2]), "must be a JSON object"),
    (json.dumps(dict(payload(), version="3")), "version: '3' is not an Alertmanager webhook payload"),
    (json.dumps(dict(payload(), alerts={"a": 1})), "alerts: {'a': 1} must be a list"),
    (json.dumps(dict(payload(), receiver=None)), "receiver: None must be a string"),
    (json.dumps(payload(dict(alert("h", "i"), status="pending"))), "alerts[0].status: 'pending' must be firing or resolved"),
    (json.dumps(payload(alert("h", "i"), dict(alert("h", "i"), labels={"host": 1}))), "alerts[1].labels"),
    (json.dumps(payload(dict(alert("h", "i"), fingerprint=7))), "alerts[0].fingerprint: 7 must be a string"),
], ids=["broken", "not-utf8", "list", "version", "alerts", "receiver", "status", "labels", "fingerprint"])
def test_a_body_that_is_not_a_v4_payload_is_answered_400_with_what_is_wrong(body, says, caplog):
    caplog.set_level(logging.INFO)

    async def run():
        async with source() as (queue, url):
            status, text = await post(url, body)
            return status, text, drain(queue)

    status, text, events = asyncio.run(run())
    assert status == 400, text
    assert says in text
    assert events == []
    assert TOKEN not in caplog.text


def test_only_the_configured_path_receives():
    async def run():
        async with source(data_path="/hooks/retune") as (queue, url):
            body = payload(alert("spark-01", "gpt-oss-120b"))
            other = await post(url.replace("/hooks/retune", "/alerts"), body)
            mine = await post(url, body)
            return other, mine, drain(queue)

    other, mine, events = asyncio.run(run())
    assert other[0] == 404 and mine[0] == 202 and len(events) == 1


@pytest.mark.parametrize("args, says", [
    ({}, "host: None must be the address to listen on"),
    ({"host": ""}, "host: '' must be the address"),
    ({"host": "127.0.0.1", "port": 70000}, "port: 70000 must be a port number"),
    ({"host": "127.0.0.1", "port": True}, "port: True must be a port number"),
    ({"host": "127.0.0.1", "data_path": "alerts"}, "data_path: 'alerts' must be a URL path"),
    ({"host": "127.0.0.1", "token": ""}, "token: (value hidden) must be a non-empty string"),
    ({"host": "127.0.0.1", "tokn": "x"}, "unknown argument tokn"),
    ({"host": "127.0.0.1"}, "a bearer token is required (token or token_file)"),
    ({"host": "127.0.0.1", "token_file": "/nonexistent/token"}, "token_file: '/nonexistent/token' cannot be read"),
    ({"host": "127.0.0.1", "token_file": "token"}, "token_file: 'token' must be an absolute path"),
    ({"host": "127.0.0.1", "token": TOKEN, "token_file": "/t"}, "give one of them, not both"),
    ({"host": "127.0.0.1", "token": TOKEN, "max_alerts": 0}, "max_alerts: 0 must be a whole number from 1"),
    ({"host": "127.0.0.1", "token": TOKEN, "alertnames": ["{{ x }}"]}, "alertnames: ['{{ x }}'] must be a non-empty list"),
], ids=["no-host", "empty-host", "port-range", "port-bool", "path", "empty-token", "typo", "no-token", "no-file",
        "relative-file", "both", "cap", "names"])
def test_bad_arguments_are_refused_before_listening(args, says):
    with pytest.raises(ValueError) as info:
        asyncio.run(PLUGIN["main"](asyncio.Queue(), args))
    assert says in str(info.value)


def test_arguments_as_the_rulebook_renders_them():
    # a port from a rulebook variable can arrive as text; ansible-rulebook adds eda_feedback_queue for some sources
    s = PLUGIN["settings"]({"host": "10.0.8.5", "port": "5051", "token": TOKEN, "eda_feedback_queue": object()})
    assert s == {"host": "10.0.8.5", "port": 5051, "data_path": "/alerts", "token": TOKEN,
                 "alertnames": ("SpeculationStoppedPaying",), "labels": ("host", "engine_instance"), "max_alerts": 16,
                 "max_body": 1048576, "max_depth": 8}


def test_the_token_is_read_from_its_file(tmp_path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    assert PLUGIN["settings"]({"host": "127.0.0.1", "token_file": str(tmp_path / "token")})["token"] == TOKEN
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="holds no token"):
        PLUGIN["settings"]({"host": "127.0.0.1", "token_file": str(tmp_path / "empty")})


def test_the_name_pattern_is_the_settings_one():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _vocabulary as vocabulary
    assert PLUGIN["NAME_RE"].pattern == vocabulary.NAME_RE.pattern


TEMPLATE = "{{ lookup('ansible.builtin.pipe', 'touch /tmp/specdec-marker') }}"


@pytest.mark.parametrize("labels, says", [
    ({"host": TEMPLATE, "engine_instance": "gpt-oss-120b"}, "label host"),
    ({"host": "spark-01", "engine_instance": "{% raw %}x"}, "label engine_instance"),
    ({"host": "spark 01", "engine_instance": "gpt-oss-120b"}, "label host"),
    ({"host": "-spark", "engine_instance": "gpt-oss-120b"}, "label host"),
    ({"host": "spark-01"}, "label engine_instance: None"),
    ({"host": "x" * 129, "engine_instance": "gpt-oss-120b"}, "label host"),
    ({"alertname": "Watchdog", "host": "spark-01", "engine_instance": "gpt-oss-120b"}, "alertname 'Watchdog'"),
], ids=["template", "jinja-tag", "space", "dash", "missing", "long", "other-alert"])
def test_an_alert_whose_labels_are_not_plain_names_is_dropped(labels, says, caplog):
    caplog.set_level(logging.INFO)
    bad = alert("spark-01", "gpt-oss-120b", fingerprint="bad")
    bad["labels"] = dict({"alertname": "SpeculationStoppedPaying"}, **labels)

    async def run():
        async with source() as (queue, url):
            status, text = await post(url, payload(bad, alert("spark-02", "gpt-oss-120b")))
            return status, text, drain(queue)

    status, text, events = asyncio.run(run())
    assert status == 202 and "1 taken, 1 dropped" in text, text
    assert [e["alert"]["labels"]["host"] for e in events] == ["spark-02"]
    assert says in caplog.text


def test_a_repeat_of_an_alert_already_taken_is_dropped_and_a_new_start_is_not():
    async def run():
        async with source() as (queue, url):
            first = await post(url, payload(alert("spark-01", "gpt-oss-120b")))
            again = await post(url, payload(alert("spark-01", "gpt-oss-120b")))
            later = dict(alert("spark-01", "gpt-oss-120b"), startsAt="2026-09-02T10:00:00.000Z")
            resolved = alert("spark-01", "gpt-oss-120b", "resolved")
            new = await post(url, payload(later, resolved))
            return first, again, new, drain(queue)

    first, again, new, events = asyncio.run(run())
    assert "1 taken" in first[1] and "0 taken, 0 dropped, 1 repeated" in again[1] and "2 taken" in new[1]
    assert [(e["alert"]["startsAt"], e["alert"]["status"]) for e in events] == [
        ("2026-09-01T10:00:00.000Z", "firing"), ("2026-09-02T10:00:00.000Z", "firing"),
        ("2026-09-01T10:00:00.000Z", "resolved")]


def test_a_notification_of_2000_alerts_is_capped():
    many = [{"status": "firing", "labels": {"alertname": "SpeculationStoppedPaying", "host": "spark-%04d" % i,
                                            "engine_instance": "gpt-oss-120b"}, "fingerprint": "%016x" % i}
            for i in range(2000)]

    async def run():
        async with source() as (queue, url):
            status, text = await post(url, payload(*many))
            return status, text, drain(queue)

    status, text, events = asyncio.run(run())
    assert status == 202 and "16 taken" in text and "1984 over the cap" in text, text
    assert len(events) == 16


@pytest.mark.parametrize("body, status, says", [
    ("[" * 100000 + "]" * 100000, 400, "nests deeper than 8 levels"),
    (json.dumps(dict(payload(alert("spark-01", "i")), groupLabels={"a": [[[[[[[["x"]]]]]]]]})), 400, "nests deeper"),
    (json.dumps(dict(payload(), padding="x" * 1100000)), 413, "over 1048576 bytes"),
], ids=["deep", "nested-field", "huge"])
def test_a_deep_or_huge_body_is_a_4xx_never_a_traceback(body, status, says, caplog):
    caplog.set_level(logging.INFO)

    async def run():
        async with source() as (queue, url):
            answer = await post(url, body)
            # still serving after it
            ok = await post(url, payload(alert("spark-01", "gpt-oss-120b")))
            return answer, ok, drain(queue)

    (code, text), ok, events = asyncio.run(run())
    assert code == status and says in text, (code, text[:300])
    assert "Traceback" not in caplog.text and "Error handling request" not in caplog.text
    assert ok[0] == 202 and len(events) == 1


def test_a_secret_given_as_a_bad_token_is_not_shown():
    with pytest.raises(ValueError) as info:
        PLUGIN["settings"]({"host": "127.0.0.1", "token": "has space " + TOKEN})
    assert TOKEN not in str(info.value)


def test_the_documentation_is_yaml_and_names_every_argument():
    import yaml
    doc = yaml.safe_load(PLUGIN["DOCUMENTATION"])
    assert sorted(doc["options"]) == sorted(PLUGIN["ARGS"])
    assert doc["options"]["host"]["required"] is True and "default" not in doc["options"]["host"]
    assert doc["options"]["port"]["default"] == PLUGIN["DEFAULT_PORT"]
    assert doc["options"]["data_path"]["default"] == PLUGIN["DEFAULT_PATH"]
    assert yaml.safe_load(PLUGIN["EXAMPLES"])[0]["sources"][0]["specdec.serve.alertmanager"]["host"] == "10.0.8.5"
