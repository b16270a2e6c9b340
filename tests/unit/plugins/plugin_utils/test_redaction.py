"""The one redaction rule: the specs' no_log marks decide what is secret; results lose secret keys, messages secret values."""

from ansible_collections.specdec.serve.plugins.plugin_utils import _redaction as redaction


def test_the_secrets_are_what_the_specs_mark_no_log():
    assert redaction.secret_keys() == ["api_key"]
    assert {"gateway_api_keys", "gateway_tls_key", "inference_server_registry_password", "inference_server_secret_env",
            "model_cache_hf_token"} <= set(redaction.secret_options())
    assert "inference_server_instances" not in redaction.secret_options()


def test_secret_values_are_found_in_no_log_settings_and_under_secret_keys_anywhere():
    variables = {
        "inference_server_secret_env": {"HF_TOKEN": "hf_abcdefgh", "OTHER": "short"},
        "draft_sweep_instances": [{"name": "a", "port": 8000, "api_key": "key-123456", "env": {"X": "visible-value"}}],
        "gateway_api_keys": ["gw-key-1234", {"name": "ops", "key": "gw-key-5678"}],
        "firewall_allowed_cidrs": ["10.0.0.0/8"],
    }
    found = redaction.secret_values(variables)
    # "short" and "ops" (a key's name, inside the no_log setting) are too short to hide without mangling messages
    assert set(found) == {"hf_abcdefgh", "key-123456", "gw-key-1234", "gw-key-5678"}
    assert "visible-value" not in found and "10.0.0.0/8" not in found
    # the longest first, so a secret that holds another is replaced whole
    assert [len(s) for s in found] == sorted((len(s) for s in found), reverse=True)


def test_a_result_loses_every_secret_key_and_a_message_every_secret_value():
    typed = {"instances": [{"name": "a", "api_key": "key-123456", "nested": {"api_key": "key-999999", "port": 1}}]}
    assert redaction.without_secret_keys(typed) == {"instances": [{"name": "a", "nested": {"port": 1}}]}
    msg = "draft_sweep_instances: [{'name': 'a', 'api_key': 'key-123456'}] port 70000 is not a TCP port"
    assert redaction.scrub(msg, ["key-123456"]) == msg.replace("key-123456", redaction.HIDDEN)
    assert redaction.scrub({"m": [msg]}, ["key-123456"]) == {"m": [msg.replace("key-123456", redaction.HIDDEN)]}
    assert redaction.scrub(msg, []) == msg
