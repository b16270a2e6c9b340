#!/usr/bin/env python3
"""The tune loop's figures, from the timeline molecule fleet's tune loop test records (lab/.state/molecule/
fleet-tune-loop.json): from an acceptance drop injected on one engine host to the alert, and to the re-tuned
configuration serving on the whole class; the capacity lost meanwhile (host-seconds out of rotation at the
gateway, as a share of the class's capacity over that window); the streams through the front door and how many
failed. One run's numbers, measured on this machine: the waits of the lab's settings (window 20 s, `for` 20 s),
the sweep's size and the rollout's batches dominate them.

    make molecule SCENARIOS=fleet && python3 bench/tune_loop/report.py [--json PATH] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, "..", "..", "lab", ".state", "molecule", "fleet-tune-loop.json")


def figures(t: dict) -> dict:
    """The report's figures from a recorded timeline (times in epoch seconds, drained seconds per host)."""
    if not t.get("fired") or not t.get("retuned"):
        raise ValueError("the timeline has no alert or no end of the re-tune: the run failed (%r)" % (t,))
    window = t["retuned"] - t["dropped"]
    drained = sum(t["drained_s"].values())
    return {"alert_after_drop_s": round(t["fired"] - t["dropped"], 1),
            "retuned_after_drop_s": round(window, 1),
            "retune_after_alert_s": round(t["retuned"] - t["fired"], 1),
            "drained_host_s": round(drained, 1),
            "capacity_lost": round(drained / (t["hosts"] * window), 3) if window > 0 else None,
            "requests": t["requests"], "failed": t["failed"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=DEFAULT, help="the recorded timeline")
    parser.add_argument("--out", help="write the figures here too")
    args = parser.parse_args(argv)
    with open(args.json, encoding="utf-8") as fh:
        f = figures(json.load(fh))
    print("alert %.1f s after the drop; class re-tuned %.1f s after the drop (%.1f s after the alert)"
          % (f["alert_after_drop_s"], f["retuned_after_drop_s"], f["retune_after_alert_s"]))
    print("capacity lost: %.1f host-seconds out of rotation, %.1f %% of the class over that window"
          % (f["drained_host_s"], 100 * (f["capacity_lost"] or 0)))
    print("front door: %d streams, %d failed" % (f["requests"], f["failed"]))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(f, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
