"""Stand-in of tensorrt_llm.llmapi.llm_args: TorchLlmArgs validates the merged LLM arguments."""

from specdec_emulator.trtllm_args import build_llm_args
from specdec_emulator.versions import engine_version


class TorchLlmArgs:
    """`TorchLlmArgs(**kwargs)` raises what the emulated release raises for the arguments."""

    def __init__(self, **kwargs):
        self.values = build_llm_args(engine_version("trtllm"), {}, kwargs)

    @classmethod
    def from_kwargs(cls, **kwargs):
        return cls(**kwargs)
