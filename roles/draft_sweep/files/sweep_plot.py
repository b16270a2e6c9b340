"""Plot a draft_sweep JSON report: throughput and acceptance length against draft length.

One row of two panels per workload; with several, a diamond marks the draft length the rule chose
for all of them, a star each workload's own winner.

The acceptance length is drawn twice where both exist: the engine's figure (solid) and serve_bench's
client-side estimate, tokens per decoding step read from the stream (dashed).

Usage: sweep_plot.py REPORT.json OUT.png   (runs on the controller; needs matplotlib)
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def panels(ax1, ax2, groups, chosen, picked, title):
    """Throughput and acceptance of one workload's groups; star = its winner, diamond = the rule's pick."""
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    levels = sorted(set(g["concurrency"] for g in groups))
    for i, conc in enumerate(levels):
        color = colors[i % len(colors)]
        mine = [g for g in groups if g["concurrency"] == conc and g["median"] is not None]
        spec = [g for g in mine if g["draft_len"] > 0]
        base = [g for g in mine if g["draft_len"] == 0]
        xs = [g["draft_len"] for g in spec]
        ax1.errorbar(xs, [g["median"] for g in spec], yerr=[1.4826 * (g["mad"] or 0) for g in spec],
                     color=color, marker="o", capsize=3, label="concurrency %d" % conc)
        rejected = [g for g in spec if g["status"] != "ok"]
        if rejected:
            ax1.scatter([g["draft_len"] for g in rejected], [g["median"] for g in rejected],
                        marker="x", s=80, color=color, zorder=3)
        if base:
            ax1.axhline(base[0]["median"], color=color, linestyle="--", linewidth=1)
            ax1.scatter([0], [base[0]["median"]], marker="s", color=color, zorder=3)
        for marks, marker, size in ((chosen, "*", 250), (picked, "D", 90)):
            win = marks.get(conc)
            g = next((g for g in mine if g["draft_len"] == win), None)
            if g is not None:
                ax1.scatter([win], [g["median"]], marker=marker, s=size, color=color, edgecolor="black",
                            zorder=4)
        acc = [g for g in spec if g.get("acceptance_length") is not None]
        if acc:
            ax2.plot([g["draft_len"] for g in acc], [g["acceptance_length"] for g in acc],
                     color=color, marker="o", label="concurrency %d, engine" % conc)
        est = [g for g in spec if g.get("acceptance_length_estimate") is not None]
        if est:
            ax2.plot([g["draft_len"] for g in est], [g["acceptance_length_estimate"] for g in est],
                     color=color, marker="^", linestyle="--",
                     label="concurrency %d, client-side estimate" % conc)
    ax1.set_xlabel("draft length (0 = no speculation, dashed line)")
    ax1.set_ylabel("output throughput (tok/s, median; bars 1.4826 MAD)")
    ax1.set_title("%sthroughput; star: chosen, x: rejected%s"
                  % (title, "" if not picked else ", diamond: the rule's pick"), fontsize="medium")
    ax1.grid(True, alpha=0.3)
    ax1.legend(fontsize="small")
    ax2.set_xlabel("draft length")
    ax2.set_ylabel("mean acceptance length (tokens per step)")
    ax2.set_title("%sacceptance length (engine: solid; estimate: dashed)" % title, fontsize="medium")
    ax2.grid(True, alpha=0.3)
    if ax2.lines:
        ax2.legend(fontsize="small")
    else:
        ax2.text(0.5, 0.5, "no acceptance figure (none from the engine, no estimate)",
                 ha="center", va="center", transform=ax2.transAxes)


def main(src, dst):
    with open(src, encoding="utf-8") as fh:
        report = json.load(fh)
    sel = report["selection"]
    workloads = sel.get("workloads") or {"default": {"by_concurrency": sel["by_concurrency"]}}
    names = list(workloads)
    several = len(names) > 1
    picked = dict((e["concurrency"], e["draft_len"]) for e in sel["by_concurrency"]) if several else {}
    fig, axes = plt.subplots(len(names), 2, figsize=(13, 4.8 * len(names)), squeeze=False)
    for row, name in enumerate(names):
        groups = [g for g in sel["groups"] if g.get("workload", name) == name]
        chosen = dict((e["concurrency"], e["draft_len"]) for e in workloads[name]["by_concurrency"])
        panels(axes[row][0], axes[row][1], groups, chosen, picked, "%s: " % name if several else "")
    rule = (sel.get("rule") or {}).get("text")
    fig.suptitle("%s / %s, run %s%s" % (report["host"], report["instance"], report["run_id"],
                                        "\nrule: %s" % rule if several and rule else ""))
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
