"""specdec_emulator: a GPU-less stand-in for `trtllm-serve` and `vllm serve`.

It parses the engines' command lines and configuration files with the strictness of the
emulated version, serves their HTTP endpoints and metric formats, and produces tokens on a
clock that follows the speculative-decoding model (see `clock.py`).
"""

__all__ = ["__version__"]
__version__ = "1.0.0"
