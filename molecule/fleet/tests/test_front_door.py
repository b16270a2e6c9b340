"""The front door refuses what it cannot route unambiguously (fleet scenario, gateway fleet-gw).

- two top-level "model" keys: 400 model_ambiguous (HAProxy would route by the first, the engine read the last);
  a "model" key of a nested object (a JSON schema's property) is no refusal;
- a body larger than the routing buffer: 413 request_too_large, with or without Content-Length;
- the Bearer scheme in any case is accepted, any other scheme refused (401);
- the Prometheus endpoint answers on loopback only (gateway_stats_address), not on the lab network, where the
  gateway's firewall drops the port too.
"""

import http.client
import json
import os
import socket
import ssl
import subprocess
import sys

import pytest

PROJECT = os.environ["MOLECULE_PROJECT_DIRECTORY"]
sys.path.insert(0, os.path.join(PROJECT, "lab"))
import lab  # noqa: E402
NETWORK = "molecule-fleet"
GATEWAY = "fleet-gw"
GATEWAY_PORT = 8443
STATS_PORT = 8404
GATEWAY_SECRETS = os.path.join(PROJECT, "lab", ".cache", "gateway")
INSTANCE = "gpt-oss-120b"
# gateway_request_buffer_kb's default (256): a body of 300 KiB cannot be whole in the buffer
TOO_LARGE = 300 * 1024


def lab_ip(name):
    out = lab.lab_ip(name, NETWORK)
    assert out.startswith("172.29.6."), out
    return out


def api_key():
    with open(os.path.join(GATEWAY_SECRETS, "api-key"), encoding="utf-8") as fh:
        return fh.read().strip()


def call(body, authorization=None, chunked=False):
    """POST /v1/completions to the front door (TLS, the lab CA): (status, body text). ``body`` is sent as given
    (bytes or text), so a body with two "model" keys goes out as written."""
    ctx = ssl.create_default_context(cafile=os.path.join(GATEWAY_SECRETS, "ca.crt"))
    conn = http.client.HTTPSConnection(lab_ip(GATEWAY), GATEWAY_PORT, context=ctx, timeout=60)
    headers = {"Content-Type": "application/json",
               "Authorization": "Bearer %s" % api_key() if authorization is None else authorization}
    data = body.encode() if isinstance(body, str) else body
    try:
        if chunked:
            conn.request("POST", "/v1/completions", body=(data[i:i + 4096] for i in range(0, len(data), 4096)),
                         headers=headers, encode_chunked=True)
        else:
            conn.request("POST", "/v1/completions", body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def call_early_answer(body, chunked):
    """POST a body the gateway answers before it has read it all (then closes): the answer is read even when the
    gateway closed before the whole body went out. (status, body text)"""
    ctx = ssl.create_default_context(cafile=os.path.join(GATEWAY_SECRETS, "ca.crt"))
    address = lab_ip(GATEWAY)
    data = body.encode()
    head = ["POST /v1/completions HTTP/1.1", "Host: %s:%d" % (address, GATEWAY_PORT), "Content-Type: application/json",
            "Authorization: Bearer %s" % api_key(), "Connection: close"]
    if chunked:
        head.append("Transfer-Encoding: chunked")
        data = b"".join(b"%x\r\n%s\r\n" % (len(data[i:i + 4096]), data[i:i + 4096])
                        for i in range(0, len(data), 4096)) + b"0\r\n\r\n"
    else:
        head.append("Content-Length: %d" % len(data))
    payload = ("\r\n".join(head) + "\r\n\r\n").encode() + data
    with ctx.wrap_socket(socket.create_connection((address, GATEWAY_PORT), timeout=60),
                         server_hostname=address) as sock:
        try:
            sock.sendall(payload)
        except OSError:  # the gateway closed after answering (ssl.SSLError is an OSError): its answer is read below
            pass
        answer = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2].decode()


def error_code(text):
    return json.loads(text)["error"]["code"]


def completion(**extra):
    return dict({"model": INSTANCE, "prompt": "front door", "max_tokens": 2}, **extra)


@pytest.mark.parametrize("body", [
    '{"model": "%s", "prompt": "x", "max_tokens": 2, "model": "other"}' % INSTANCE,
    '{"model": "other", "prompt": "x", "max_tokens": 2, "model": "%s"}' % INSTANCE,
    # the same key once its escapes are decoded, as the engine's JSON parser reads it
    '{"model": "%s", "prompt": "x", "max_tokens": 2, "mod\\u0065l": "other"}' % INSTANCE,
], ids=["first-routable", "last-routable", "escaped"])
def test_two_model_keys_are_refused_400(body):
    status, text = call(body)
    assert status == 400 and error_code(text) == "model_ambiguous", text


@pytest.mark.parametrize("extra", [
    # a JSON schema with a property named model: a nested object's key, not the request's
    {"response_format": {"type": "json_schema", "json_schema": {"name": "car", "schema": {
        "type": "object", "properties": {"model": {"type": "string"}}, "required": ["model"]}}}},
    {"prompt": 'say "model": "other" {"model": 1}'},
], ids=["nested-key", "in-a-string"])
def test_a_model_key_in_a_nested_object_or_a_string_is_no_refusal(extra):
    status, text = call(json.dumps(completion(**extra)))
    assert status == 200 and json.loads(text)["choices"], text


@pytest.mark.parametrize("model_first", [True, False], ids=["model-first", "model-last"])
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_larger_than_the_buffer_gets_413(model_first, chunked):
    pad = "x" * TOO_LARGE
    body = completion(prompt=pad) if model_first else dict({"prompt": pad, "max_tokens": 2}, model=INSTANCE)
    status, text = call_early_answer(json.dumps(body), chunked)
    assert status == 413 and error_code(text) == "request_too_large", text[:300]


def test_a_body_that_fits_the_buffer_is_routed():
    status, text = call(json.dumps(completion(prompt="x" * (64 * 1024))), chunked=True)
    assert status == 200 and json.loads(text)["choices"], text[:300]


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_bearer_scheme_is_case_insensitive(scheme):
    status, text = call(json.dumps(completion()), authorization="%s %s" % (scheme, api_key()))
    assert status == 200 and json.loads(text)["choices"], text


@pytest.mark.parametrize("template", ["Basic %s", "Token %s", "%s", "Bearerx %s"])
def test_another_scheme_is_refused_401(template):
    status, text = call(json.dumps(completion()), authorization=template % api_key())
    assert status == 401 and error_code(text) == "invalid_api_key", text


def test_the_prometheus_endpoint_is_not_on_the_lab_network():
    # gateway_stats_address defaults to loopback: HAProxy listens on the port on loopback only (test_fleet.py reads
    # the exporter there)
    listening = subprocess.run(["docker", "exec", GATEWAY, "ss", "-Hltn", "sport = :%d" % STATS_PORT],
                               capture_output=True, text=True, timeout=60, check=True).stdout
    local = [line.split()[3] for line in listening.splitlines() if line.strip()]
    assert local and all(address.startswith("127.0.0.1:") for address in local), listening
    # and the gateway's firewall drops the port for all but the monitoring hosts: from here nothing answers on the
    # gateway's lab address (a drop times out, a closed port refuses)
    with pytest.raises((ConnectionRefusedError, TimeoutError)):
        socket.create_connection((lab_ip(GATEWAY), STATS_PORT), timeout=10).close()
