"""Stand-in of vllm.engine.arg_utils: EngineArgs.create_engine_config() checks what vLLM's does for the
emulator (the speculative config against the release's table)."""

import os

from specdec_emulator import vllm_cli


class EngineArgs:
    def __init__(self, args, version, table):
        self.args = args
        self.version = version
        self.table = table

    @classmethod
    def from_cli_args(cls, args, version, table):
        return cls(args, version, table)

    def create_engine_config(self, *args, **kwargs):
        spec = self.args.speculative_config
        if spec is None:
            return {}
        if not isinstance(spec, dict):
            raise ValueError("--speculative-config must be a JSON object")
        try:
            return {"speculative_config": vllm_cli.speculative_config(
                spec, self.args.tensor_parallel_size, dict(os.environ), lambda _w: None, self.table)}
        except vllm_cli.SpeculativeConfigError as exc:
            raise ValueError(str(exc))


class AsyncEngineArgs(EngineArgs):
    pass
