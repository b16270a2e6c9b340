#!/usr/bin/env python3
"""The heal's figures, from the timeline molecule fleet's heal test records (lab/.state/molecule/fleet-heal.json):
for each wedge of one engine behind the front door, the time to SpecdecEngineWedged against the bound the rules
promise (plugin_utils/_monitoring_rules.py ``wedged_bound``, with the scenario's settings), to the heal recorded by
the tune loop, and to the engine serving a stream through the front door again; the streams and how many failed
(those the wedged engine held). One run's numbers, measured on this machine: the lab's settings (probe every 10 s,
deadline 5 s, ``for`` 20 s) and the heal play's start-up on the monitoring host dominate them.

    make molecule SCENARIOS=fleet && python3 bench/heal/report.py [--json PATH] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, "..", "..", "lab", ".state", "molecule", "fleet-heal.json")


def figures(t: dict) -> dict:
    """The report's figures from a recorded timeline (times in epoch seconds)."""
    rounds = t.get("rounds") or []
    if len(rounds) != 3 or not all(r.get("fired") and r.get("recorded") for r in rounds):
        raise ValueError("the timeline lacks a wedge's alert or heal: the run failed (%r)" % (t,))
    out = []
    for r in rounds:
        out.append({"alert_after_wedge_s": round(r["fired"] - r["wedged"], 1),
                    "heal_recorded_after_wedge_s": round(r["recorded"] - r["wedged"], 1),
                    "serving_after_wedge_s": round(r["served"] - r["wedged"], 1) if r.get("served") else None})
    bound = t["alert_bound_s"]
    return {"rounds": out, "alert_bound_s": bound,
            "alert_within_bound": all(r["alert_after_wedge_s"] <= bound for r in out),
            "alert_over_bound_max": round(max(r["alert_after_wedge_s"] for r in out) / bound, 2),
            "requests": t["requests"], "failed": t["failed"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=DEFAULT, help="the recorded timeline")
    parser.add_argument("--out", help="write the figures here too")
    args = parser.parse_args(argv)
    with open(args.json, encoding="utf-8") as fh:
        f = figures(json.load(fh))
    for i, r in enumerate(f["rounds"], 1):
        print("wedge %d: alert %.1f s after it (bound %.1f s); heal recorded %.1f s after it; %s"
              % (i, r["alert_after_wedge_s"], f["alert_bound_s"], r["heal_recorded_after_wedge_s"],
                 "serving again %.1f s after it" % r["serving_after_wedge_s"] if r["serving_after_wedge_s"]
                 else "past the restart limit: left drained"))
    print("alert within its bound every time: %s (the slowest at %.2f of it)"
          % ("yes" if f["alert_within_bound"] else "NO", f["alert_over_bound_max"]))
    print("front door: %d streams, %d failed (the streams the wedged engine held)" % (f["requests"], f["failed"]))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(f, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
