"""`python3 -m specdec_emulator {trtllm-serve|vllm} ...`"""

import sys


def main():
    argv = sys.argv[1:]
    if argv and argv[0] == "vllm":
        from .vllm_cli import main as vmain
        return vmain(argv[1:])
    if argv and argv[0] == "trtllm-serve":
        argv = argv[1:]
    from .trtllm_cli import main as tmain
    return tmain(argv)


if __name__ == "__main__":
    sys.exit(main())
