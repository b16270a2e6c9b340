"""Stand-in of tensorrt_llm.commands.serve: `main` is the trtllm-serve command.

As upstream, the serve command parses the command line, reads the YAML of --extra_llm_api_options,
merges it over the arguments the command line gives and hands the result to this module's
`launch_server`, looked up when it is called (so code that replaces it, like the engine check, is
called instead). Usage errors raise an exception with click's `format_message()`.
"""

import io

import yaml

from specdec_emulator import trtllm_cli
from specdec_emulator.versions import engine_version


class UsageError(Exception):
    """click.exceptions.UsageError's surface: the message as click prints it after 'Error: '."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message

    def format_message(self):
        return self.message


class _Command:
    """The trtllm-serve click group, serve being its default command."""

    def main(self, args=None, prog_name="trtllm-serve", standalone_mode=True):
        argv = list(args or [])
        out = io.StringIO()
        values, code = trtllm_cli.parse_cli(argv, engine_version("trtllm"), out)
        if values is None:
            if code == 0:
                return 0
            lines = [line for line in out.getvalue().splitlines() if line.startswith("Error: ")]
            raise UsageError(lines[-1][len("Error: "):] if lines else out.getvalue().strip())
        llm_args = trtllm_cli.cli_to_llm_args(values)
        path = values.get("extra_llm_api_options")
        if path:
            with open(path, encoding="utf-8") as handle:
                extra = yaml.safe_load(handle) or {}
            llm_args.update(extra)
        global _ARGV
        _ARGV = argv
        return launch_server(values["host"], values["port"], llm_args)


_ARGV = []
main = _Command()


def launch_server(host, port, llm_args, **kwargs):
    """Serve: the emulator, started from the same command line."""
    return trtllm_cli.main(_ARGV)
