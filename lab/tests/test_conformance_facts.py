"""What the conformance check reads from a refused start: the error and its detail, without the noise."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "emulator"))
import conformance as C  # noqa: E402

TRACEBACK = """(APIServer pid=1) INFO 11-29 19:31:57 [utils.py:253] non-default args: {'model': '/models/tiny-llama'}
Traceback (most recent call last):
  File "/usr/local/bin/vllm", line 10, in <module>
pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig
bogus_key
  Unexpected keyword argument [type=unexpected_keyword_argument, input_value=1, input_type=int]
    For further information visit https://errors.pydantic.dev/2.11/v/unexpected_keyword_argument
"""


def test_the_detail_is_the_errors_own_lines():
    facts = C.cli_facts("spec_unknown_key", 1, TRACEBACK)
    assert facts["cli.spec_unknown_key.detail"] == [
        "bogus_key", "Unexpected keyword argument [type=unexpected_keyword_argument, input_value=1, input_type=int]"]


def test_log_lines_written_after_the_traceback_are_not_part_of_it():
    late = TRACEBACK + ("(APIServer pid=1) INFO 11-29 19:31:58 [model.py:733] Resolved architecture: LlamaForCausalLM\n"
                        "INFO 11-29 19:31:58 [model.py:2152] Using max model len 1024\n")
    assert C.cli_facts("spec_unknown_key", 1, late) == C.cli_facts("spec_unknown_key", 1, TRACEBACK)
    # a line of the error that merely mentions INFO is kept
    odd = TRACEBACK.replace("bogus_key\n", "bogus_key\nINFO is not a log line here\n")
    assert "INFO is not a log line here" in C.cli_facts("spec_unknown_key", 1, odd)["cli.spec_unknown_key.detail"]
