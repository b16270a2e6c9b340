# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether serve_bench's own client limited a measurement (stdlib only).

A client that cannot keep up stamps chunks late: latencies grow, throughput falls and the engine is
blamed. Each repetition is watched for four signs; any one past its threshold flags the repetition
(``client.bottleneck`` with ``client.reasons``):

- ``run_queue_wait``: the client's threads waited for a CPU, on average more than
  ``RUN_QUEUE_WAIT_MS`` per time they were scheduled (Linux ``/proc/<pid>/task/<tid>/schedstat``:
  time on a run queue / timeslices, summed over the client's threads). A client that has a CPU when
  it wakes waits microseconds; one that shares its CPU with busy processes waits a scheduler slice
  (milliseconds) at every chunk, and every chunk's stamp is late by that much.
- ``chunk_bursts``: more than ``CHUNK_BURST_SHARE`` of the gaps between a request's text chunks are
  below ``BURST_GAP_MS``: the client read the next chunk right after the previous one, because both
  were already waiting. An engine writes one event per decoding step, milliseconds apart, so events
  read back to back queued in the socket while the client was not reading (a starved client) -- or
  were written together (a proxy that buffers, an engine's HTTP server that falls behind). Bursts
  alone cannot tell the two apart; the client's own evidence can. They flag the client only when the
  scheduler statistics cannot be read, or when they show the client waiting for a CPU (more than
  ``BURST_CORROBORATION`` of the ``run_queue_wait`` threshold per timeslice) or busy (more than that
  share of the ``cpu_saturated`` threshold). A client that had a CPU whenever it woke and used little
  of it read the chunks as soon as they came: the server wrote them together, which is the server's
  behaviour to measure, not the client's fault. Such bursts are reported (``server_bursts``) and do
  not flag the run.
- ``cpu_saturated``: the process used more than ``CPU_PER_WALL`` CPU-seconds per second of wall time;
  the client is Python, one core at most while it holds the interpreter lock, so near one it is the
  limit.
- ``send_lag`` (open loop): the 90th percentile of the client's own delay in sending a request
  (scheduled time -> sent, leaving out waits for the in-flight cap) is over ``SEND_LAG_P90_MS``.

The thresholds sit far from what an unstarved client shows (waits of tens of microseconds, a few
percent of chunks back to back, a fraction of a core, send lags under a millisecond) and well inside
what a starved one shows (waits of 10 ms and more, nine chunks in ten back to back, send lags of
tens of milliseconds): see docs/serve_bench.md.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import time

from ansible_collections.specdec.serve.plugins.module_utils.bench_stats import percentile

RUN_QUEUE_WAIT_MS = 2.0
CHUNK_BURST_SHARE = 0.5
CPU_PER_WALL = 0.9
SEND_LAG_P90_MS = 10.0
# a gap between two text chunks of a request below this is "near zero": they were read together
BURST_GAP_MS = 0.1
# fewer chunk gaps than this give no verdict on bursts
MIN_CHUNK_GAPS = 20
# the share of the run_queue_wait and cpu_saturated thresholds above which the client's own evidence
# corroborates chunk bursts as its own
BURST_CORROBORATION = 0.5


def _thread_schedstat():
    """(cpu ns, run-queue wait ns, timeslices) of the calling thread, or None off Linux."""
    tid = getattr(threading, "get_native_id", None)
    if tid is None:
        return None
    try:
        with open("/proc/self/task/%d/schedstat" % tid()) as fh:
            run, wait, slices = fh.read().split()[:3]
        return int(run), int(wait), int(slices)
    except (IOError, OSError, ValueError):
        return None


class ClientMonitor:
    """Collects the client's CPU and scheduling figures over one phase.

    ``begin()`` and ``end(records, send_lag_ms)`` bracket the phase; every thread of the client calls
    ``thread_start()`` when it starts and ``thread_end(token)`` before it ends.
    """

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.lock = threading.Lock()
        self._reset()

    def _reset(self):
        self.run_ns = self.wait_ns = self.slices = 0
        self.threads = 0
        self.schedstat = True
        self.wall0 = self.cpu0 = None

    def begin(self):
        with self.lock:
            self._reset()
        self.wall0 = time.perf_counter()
        self.cpu0 = time.process_time()

    def thread_start(self):
        return _thread_schedstat()

    def thread_end(self, token):
        now = _thread_schedstat()
        with self.lock:
            if token is None or now is None:
                self.schedstat = False
                return
            self.run_ns += now[0] - token[0]
            self.wait_ns += now[1] - token[1]
            self.slices += now[2] - token[2]
            self.threads += 1

    def end(self, records, send_lag_ms=None):
        if self.wall0 is None or self.cpu0 is None:
            raise AssertionError("end() before begin()")
        wall = time.perf_counter() - self.wall0
        cpu = time.process_time() - self.cpu0
        return assess(wall, cpu, self.run_ns if self.schedstat else None,
                      self.wait_ns if self.schedstat else None,
                      self.slices if self.schedstat else None, self.threads, records, send_lag_ms)


def chunk_bursts(records):
    """(gaps between consecutive text chunks, gaps of zero) over the successful records."""
    gaps = zero = 0
    for r in records:
        if not r or not r.get("ok"):
            continue
        times = r["chunk_times"]
        for a, b in zip(times, times[1:]):
            gaps += 1
            if (b - a) * 1000.0 < BURST_GAP_MS:
                zero += 1
    return gaps, zero


def assess(wall_s, cpu_s, run_ns, wait_ns, slices, threads, records, send_lag_ms=None):
    """The evidence of one phase and its verdict (a JSON-serialisable dict).

    ``run_ns``/``wait_ns``/``slices`` are None where the scheduler statistics could not be read;
    ``send_lag_ms`` is the open loop's list of send lags (ms), or None.
    """
    gaps, zero = chunk_bursts(records)
    out = {
        "wall_s": round(wall_s, 6),
        "cpu_s": round(cpu_s, 6),
        "cpu_per_wall": round(cpu_s / wall_s, 4) if wall_s > 0 else None,
        "threads": threads,
        "threads_cpu_s": round(run_ns / 1e9, 6) if run_ns is not None else None,
        "run_queue_wait_s": round(wait_ns / 1e9, 6) if wait_ns is not None else None,
        "run_queue_wait_per_slice_ms": (round(wait_ns / 1e6 / slices, 4)
                                        if wait_ns is not None and slices else None),
        "chunk_gaps": gaps,
        "chunk_bursts": zero,
        "chunk_burst_share": round(zero / float(gaps), 4) if gaps else None,
        "send_lag_p90_ms": None,
        "thresholds": {"run_queue_wait_per_slice_ms": RUN_QUEUE_WAIT_MS,
                       "chunk_burst_share": CHUNK_BURST_SHARE, "cpu_per_wall": CPU_PER_WALL,
                       "send_lag_p90_ms": SEND_LAG_P90_MS},
    }
    reasons = []
    w = out["run_queue_wait_per_slice_ms"]
    if w is not None and w > RUN_QUEUE_WAIT_MS:
        reasons.append("run_queue_wait: the client's threads waited %.3g ms for a CPU per timeslice "
                       "(threshold %g ms)" % (w, RUN_QUEUE_WAIT_MS))
    share = out["chunk_burst_share"]
    c = out["cpu_per_wall"]
    out["server_bursts"] = False
    if share is not None and gaps >= MIN_CHUNK_GAPS and share > CHUNK_BURST_SHARE:
        waited = w is None or w > BURST_CORROBORATION * RUN_QUEUE_WAIT_MS
        busy = c is not None and c > BURST_CORROBORATION * CPU_PER_WALL
        if waited or busy:
            reasons.append("chunk_bursts: %d of %d gaps between chunks were below %g ms, chunks read in "
                           "bursts (share %s, threshold %s)" % (zero, gaps, BURST_GAP_MS, round(share, 3),
                                                                CHUNK_BURST_SHARE))
        else:
            # the client had a CPU whenever it woke and used little of it: the server wrote them together
            out["server_bursts"] = True
    if c is not None and c > CPU_PER_WALL:
        reasons.append("cpu_saturated: the client used %.3g CPU-seconds per second (threshold %g)"
                       % (c, CPU_PER_WALL))
    if send_lag_ms:
        lag = round(percentile(send_lag_ms, 90), 4)
        out["send_lag_p90_ms"] = lag
        if lag > SEND_LAG_P90_MS:
            reasons.append("send_lag: requests left %.3g ms after their scheduled time (p90; threshold "
                           "%g ms)" % (lag, SEND_LAG_P90_MS))
    out["bottleneck"] = bool(reasons)
    out["reasons"] = reasons
    return out
