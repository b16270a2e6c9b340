"""Stand-in of vllm.entrypoints.cli.main: main() is the `vllm` command.

`vllm serve ARGS`: the arguments are parsed as the emulated release parses them (an error exits 2
with argparse's message on stderr, as vLLM does), then EngineArgs.create_engine_config() builds the
engine configuration, looked up when called (code that replaces it, like the engine check, is called
instead), then the emulator serves.
"""

import sys

from specdec_emulator import vllm_cli
from specdec_emulator.versions import engine_version
from vllm.engine import arg_utils


def main():
    argv = sys.argv[1:]
    if not argv or argv[0] != "serve":
        sys.exit(vllm_cli.main(argv))
    version = engine_version("vllm")
    table = vllm_cli.vllm_table(version)
    args, code = vllm_cli.parse_args(argv[1:], table, sys.stderr)
    if args is None:
        sys.exit(code)
    arg_utils.AsyncEngineArgs.from_cli_args(args, version, table).create_engine_config()
    sys.exit(vllm_cli.main(argv))
