"""Stand-in of the tensorrt_llm package for the lab's emulator image (see standins/README.md)."""
