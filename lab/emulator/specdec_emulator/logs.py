"""Log lines on stderr in the shape each engine prints them (so `docker logs` looks familiar)."""

import os
import sys
import time


class Logger:
    def __init__(self, engine, stream=None):
        self.engine = engine
        self.stream = stream or sys.stderr
        self.pid = os.getpid()

    def _write(self, line):
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (ValueError, OSError):
            pass

    def info(self, msg, src="api_server.py:1"):
        self._log("INFO", "I", msg, src)

    def warning(self, msg, src="api_server.py:1"):
        self._log("WARNING", "W", msg, src)

    def error(self, msg, src="api_server.py:1"):
        self._log("ERROR", "E", msg, src)

    def _log(self, level, short, msg, src):
        if self.engine == "trtllm":
            self._write("[%s] [TRT-LLM] [%s] %s" % (time.strftime("%m/%d/%Y-%H:%M:%S"), short, msg))
        else:
            self._write("(APIServer pid=%d) %s %s [%s] %s" % (
                self.pid, level, time.strftime("%m-%d %H:%M:%S"), src, msg))

    def uvicorn(self, msg, level="INFO"):
        self._write("%s:%s%s" % (level, " " * max(1, 9 - len(level)), msg))

    def raw(self, line):
        self._write(line)

    def traceback(self, exc_type, message, frames=()):
        """What an uncaught exception looks like at the end of the engine's log."""
        self._write("Traceback (most recent call last):")
        for f in frames:
            self._write(f)
        self._write("%s: %s" % (exc_type, message) if message else exc_type)
