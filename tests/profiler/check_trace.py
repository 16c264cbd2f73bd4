#!/usr/bin/env python3
"""Strict checker for htr's Chrome Trace Event JSON (htr_profiler_write).

Usage: check_trace.py TRACE.json [--steps N] [--wall-s SECONDS]

Checks (each failure is printed; exit 1 if any):
  - shape: an object with a `traceEvents` array and htr's `otherData`;
  - fields: every event has name/ph/pid/tid of the right types; "X" events
    have numeric ts >= 0 and dur >= 0 and a `cat`; "C" counters numeric args;
    "M" metadata a name; htr's op/dispatch args (impl, flops, bytes_read,
    bytes_written, host_us, device_us, dispatch_us, device_timer) typed and
    consistent (host_us == dur, dispatch_us <= host_us, non-negative);
  - units: timestamps are microseconds: the trace's span matches
    otherData.duration_us and, given --wall-s, lies between 5% and 100% of the
    run's wall-clock time (a ns or ms trace misses by 1000x);
  - nesting: complete events are strictly nested per (pid, tid) (a child lies
    within its parent; siblings do not overlap), compared in integer ns;
  - monotonic: per track, "X" events appear in non-decreasing ts order, and
    counters per pid likewise;
  - tracks: every (pid, tid) with events has a thread_name and every pid a
    process_name; pid 1 is the host; at least one device stream track has
    events; --steps N: exactly N "step *" ranges on the host.
Stdlib only.
"""
import json
import math
import sys


def ns(v):
    return int(round(v * 1000))


def check(path, steps=None, wall_s=None):
    errors = []

    def err(msg):
        if len(errors) < 50:
            errors.append(msg)

    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return [f"{path}: unreadable JSON: {e}"]
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["top level must be an object with a traceEvents array"]
    other = doc.get("otherData")
    if not isinstance(other, dict) or not isinstance(other.get("devices"), list):
        err("otherData.devices missing")
        other = {"devices": []}
    events = doc["traceEvents"]
    if not events:
        return ["traceEvents is empty"]

    thread_names, process_names = set(), {}
    tracks = {}      # (pid, tid) -> list of (t0, t1, index)
    last_ts = {}     # (pid, tid) -> ts of the previous X event (file order)
    last_counter = {}
    max_end = 0
    step_ranges = 0
    op_args = ("impl", "group", "shapes", "stream", "index", "flops", "bytes_read", "bytes_written",
               "host_us", "device_us", "dispatch_us", "device_timer")
    for i, e in enumerate(events):
        where = f"event {i}"
        if not isinstance(e, dict):
            err(f"{where}: not an object")
            continue
        name, ph, pid, tid = e.get("name"), e.get("ph"), e.get("pid"), e.get("tid")
        if not isinstance(name, str):
            err(f"{where}: name must be a string")
        if ph not in ("X", "M", "C"):
            err(f"{where}: unexpected ph {ph!r}")
            continue
        if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(tid, int) or isinstance(tid, bool):
            err(f"{where}: pid/tid must be integers")
            continue
        where = f"event {i} ({name!r} pid {pid} tid {tid})"
        args = e.get("args")
        if ph == "M":
            if not isinstance(args, dict) or not isinstance(args.get("name"), str):
                err(f"{where}: metadata without args.name")
            elif name == "thread_name":
                thread_names.add((pid, tid))
            elif name == "process_name":
                process_names[pid] = args["name"]
            else:
                err(f"{where}: unknown metadata {name!r}")
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not math.isfinite(ts) or ts < 0:
            err(f"{where}: ts must be a finite number >= 0 (microseconds)")
            continue
        if ph == "C":
            if not isinstance(args, dict) or not args or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in args.values()):
                err(f"{where}: counter args must be non-negative numbers")
            if ts < last_counter.get(pid, 0):
                err(f"{where}: counter ts {ts} goes back in time")
            last_counter[pid] = ts
            max_end = max(max_end, ts)
            continue
        dur = e.get("dur")
        if not isinstance(dur, (int, float)) or isinstance(dur, bool) or not math.isfinite(dur) or dur < 0:
            err(f"{where}: dur must be a finite number >= 0 (microseconds)")
            continue
        if not isinstance(e.get("cat"), str) or not e["cat"]:
            err(f"{where}: X event without cat")
        if not isinstance(args, dict) or not isinstance(args.get("device"), str):
            err(f"{where}: args.device missing")
            args = {}
        cat = e.get("cat")
        if cat in ("op", "library", "kernel", "copy", "fill", "device"):
            for k in op_args:
                if k not in args:
                    err(f"{where}: args.{k} missing")
            for k in ("flops", "bytes_read", "bytes_written", "host_us", "device_us", "dispatch_us"):
                v = args.get(k)
                if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                    err(f"{where}: args.{k} must be a non-negative number")
            if not isinstance(args.get("device_timer"), bool):
                err(f"{where}: args.device_timer must be a boolean")
            if cat != "device" and isinstance(args.get("host_us"), (int, float)) and abs(args["host_us"] - dur) > 0.0015:
                err(f"{where}: args.host_us {args['host_us']} != dur {dur}")
            if isinstance(args.get("dispatch_us"), (int, float)) and isinstance(args.get("host_us"), (int, float)) \
                    and args["dispatch_us"] > args["host_us"] + 0.0015:
                err(f"{where}: dispatch_us exceeds host_us")
        if pid == 1 and cat == "range" and name.startswith("step"):
            step_ranges += 1
        key = (pid, tid)
        if ts < last_ts.get(key, 0):
            err(f"{where}: ts {ts} is before the previous event's on this track")
        last_ts[key] = ts
        tracks.setdefault(key, []).append((ns(ts), ns(ts) + ns(dur), i))
        max_end = max(max_end, ts + dur)

    # Nesting per track.
    for key, evs in tracks.items():
        evs.sort(key=lambda x: (x[0], -(x[1] - x[0]), x[2]))
        stack = []
        for t0, t1, i in evs:
            while stack and stack[-1][1] <= t0:
                stack.pop()
            if stack and t1 > stack[-1][1]:
                err(f"track pid {key[0]} tid {key[1]}: event {i} [{t0}, {t1}] ns overlaps event "
                    f"{stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]}] without nesting")
            stack.append((t0, t1, i))
        if key not in thread_names:
            err(f"track pid {key[0]} tid {key[1]} has no thread_name")
        if key[0] not in process_names:
            err(f"pid {key[0]} has no process_name")
    if process_names.get(1) != "host":
        err("pid 1 must be the host")
    if not any(pid != 1 for pid, _ in tracks):
        err("no device stream track has events")

    # Units.
    dur_us = other.get("duration_us")
    if not isinstance(dur_us, (int, float)) or dur_us <= 0:
        err("otherData.duration_us missing")
    elif max_end > dur_us * 1.001 + 1:
        err(f"events end at {max_end} us, after the trace's duration {dur_us} us")
    if wall_s is not None:
        wall_us = wall_s * 1e6
        if not 0.05 * wall_us <= max_end <= wall_us:
            err(f"trace spans {max_end:.0f} us but the run took {wall_us:.0f} us: timestamps are not microseconds")
    if steps is not None and step_ranges != steps:
        err(f"{step_ranges} step ranges on the host, expected {steps}")
    for d in other.get("devices", []):
        if not isinstance(d, dict) or not isinstance(d.get("peaks"), dict) or not isinstance(d.get("id"), str):
            err("otherData.devices entries need id and peaks")
    return errors


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    path, steps, wall = argv[1], None, None
    rest = argv[2:]
    while rest:
        flag = rest.pop(0)
        if flag == "--steps" and rest:
            steps = int(rest.pop(0))
        elif flag == "--wall-s" and rest:
            wall = float(rest.pop(0))
        else:
            print(f"check_trace.py: unknown argument {flag}")
            return 2
    errors = check(path, steps, wall)
    for e in errors:
        print(f"check_trace: {e}")
    print(f"check_trace: {path}: {'FAIL' if errors else 'ok'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
