"""Stand-in of the vllm package for the lab's emulator image (see standins/README.md)."""
