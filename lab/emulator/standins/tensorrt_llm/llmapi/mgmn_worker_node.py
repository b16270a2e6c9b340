"""Stand-in of tensorrt_llm.llmapi.mgmn_worker_node: a worker rank of a multi-node trtllm-serve (lab only).

`trtllm-llmapi-launch` runs it on every rank but 0. Upstream it serves rank 0's MPICommExecutor until rank 0
shuts the executor down; here it joins the MPI world, takes part in rank 0's handshake (specdec_emulator.world)
and waits until rank 0 ends the world at its shutdown. If rank 0 dies instead, mpirun ends the job.
SPECDEC_EMU_WEDGE_FILE in its environment (mpirun -x passes the head's) is looked at on this rank's host: once the
file exists this rank hangs, and rank 0's engine wedges (specdec_emulator.world, World.wait_end).
"""

import os
import sys

from specdec_emulator.logs import Logger
from specdec_emulator.world import World


def main():
    log = Logger("trtllm")
    world = World.join()
    log.info("worker rank%d on %s joined the MPI %s" % (world.rank, world.ranks[world.rank]["host"], world.describe()))
    world.wait_end(wedge_file=(os.environ.get("SPECDEC_EMU_WEDGE_FILE") or "").strip() or None, log=log.warning)
    log.info("worker rank%d quited" % world.rank)  # upstream's words
    return 0


if __name__ == "__main__":
    sys.exit(main())
