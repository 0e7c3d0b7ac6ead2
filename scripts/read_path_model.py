#!/usr/bin/env python3
"""A small event-driven model of the ZN540's random-read path, for trying read mechanisms before building them.

It is not zonelab's model: it queues each read at each resource as it gets there (dies, channels, the way out)
instead of reserving resources when the read is submitted, so it serves every queue in arrival order, or by the
priority asked for, without moving completions. docs/calibration.md cites two of its runs (stop 38):

  scripts/read_path_model.py                        # the preset's read path: the processor's 1.197 + 1.089 us
                                                    # per 4 KiB, in arrival order, data out in ready order
  scripts/read_path_model.py --command-phase-us 9.5 --data-first
                                                    # no processor cost; each read holds its channel 9.5 us to
                                                    # send its command before the sense, data before commands

and three of stop 39:

  scripts/read_path_model.py --command-phase-us 9.5 --release-die
                                                    # as above, first come first served on the channel, and the
                                                    # die free once it has sensed (a cache register)
  scripts/read_path_model.py --command-phase-us 9.5 --command-on-die
                                                    # no processor cost; the 9.5 us held on the die before the
                                                    # sense instead of on the channel
  scripts/read_path_model.py --command-phase-us 6 --command-on-die --processor-us 0.575 --processor-per-4k-us 1.4
                                                    # the same with a processor that binds 8 KiB reads only

A closed loop of QD reads over one zone (one die of 32 at random, 8 channels, 4 dies to a channel), against
the grid's measurements (reference/zn540_spdk_grid.csv, one zone). Constants are the zn540 preset's: page
types 35.3 / 48.4 / 66.25 us (read-latency-us 50 x read-page-factors), channel 445 MiB/s, read budget
2507 MiB/s, read firmware 12 us, SPDK 0.5 + 0.5 us.
"""

import argparse
import collections
import heapq
import random

SENSE_US = [35.3, 48.4, 66.25]
MIB = 1.048576  # bytes per us in one MiB/s

# The grid's one-zone random reads: KIOPS, mean and p99 latency (us), by block size in KiB and QD.
MEASURED = {
    4: {1: (13.7, 72.6, 81.4), 16: (174.3, 91.5, 195.6), 64: (365.0, 175.0, 553.0), 128: (424.5, 301.2, 1122.3),
        256: (437.4, 585.1, 1679.4)},
    8: {1: (11.8, 84.2, 93.7), 16: (143.9, 110.8, 238.6), 64: (283.6, 225.3, 675.8), 128: (295.0, 433.6, 1630.2),
        256: (296.3, 863.9, 2408.4)},
    16: {1: (9.8, 101.6, 111.1), 16: (111.8, 142.7, 313.3), 64: (160.4, 398.6, 741.4), 128: (160.4, 797.6, 1138.7),
         256: (160.4, 1595.4, 1941.5)},
}


def run(qd, kib, args, reads=30000, seed=1):
    """Returns KIOPS, mean and p99 latency (us) of `reads` reads of `kib` KiB at `qd`, after a fifth as warm-up."""
    rng = random.Random(seed)
    move_us = kib * 1024 / (445 * MIB)
    out_us = kib * 1024 / (2507 * MIB)
    processor_us = 0.0 if args.command_phase_us else 1.197 + 1.089 * kib / 4
    if args.processor_us is not None:
        processor_us = args.processor_us + args.processor_per_4k_us * kib / 4
    events, order = [], [0]

    def at(t, kind, data):
        order[0] += 1
        heapq.heappush(events, (t, order[0], kind, data))

    dies, channels = 32, 8
    die_queue = [collections.deque() for _ in range(dies)]
    die_busy = [False] * dies  # sensing, or holding sensed data until its channel has moved it
    channel_queue = [collections.deque() for _ in range(channels)]
    channel_busy = [False] * channels
    processor_free, out_free = [0.0], [0.0]
    submitted, latencies, next_id = {}, [], [0]

    def submit(t):
        read = next_id[0]
        next_id[0] += 1
        submitted[read] = t
        die = rng.randrange(dies)
        start = t + 0.5
        if processor_us:
            start = max(start, processor_free[0])
            start = processor_free[0] = start + processor_us * (0.6 + 0.4 * rng.expovariate(1.0))
        firmware = max(12.0 - args.command_phase_us, 0.0)
        at(start + firmware, "command", (read, die))

    def to_channel(t, item):
        queue = channel_queue[item[2] % channels]
        if args.data_first and item[0] == "data":
            place = 0
            while place < len(queue) and queue[place][0] == "data":
                place += 1
            queue.insert(place, item)
        else:
            queue.append(item)
        start_channel(t, item[2] % channels)

    def start_channel(t, channel):
        if channel_busy[channel] or not channel_queue[channel]:
            return
        item = channel_queue[channel].popleft()
        channel_busy[channel] = True
        at(t + (args.command_phase_us if item[0] == "command" else move_us), "moved", item)

    def start_die(t, die):
        if die_busy[die] or not die_queue[die]:
            return
        die_busy[die] = True
        command_us = args.command_phase_us if args.command_on_die else 0.0
        at(t + command_us + rng.choice(SENSE_US), "sensed", (die_queue[die].popleft(), die))

    for _ in range(qd):
        submit(0.0)
    while len(latencies) < reads:
        t, _, kind, data = heapq.heappop(events)
        if kind == "command":
            read, die = data
            if args.command_phase_us and not args.command_on_die:
                to_channel(t, ("command", read, die))
            else:
                die_queue[die].append(read)
                start_die(t, die)
        elif kind == "sensed":
            read, die = data
            if args.release_die:
                die_busy[die] = False
                start_die(t, die)
            to_channel(t, ("data", read, die))
        elif kind == "moved":
            phase, read, die = data
            channel_busy[die % channels] = False
            if phase == "command":
                die_queue[die].append(read)
            else:
                if not args.release_die:
                    die_busy[die] = False
                out_free[0] = max(t, out_free[0]) + out_us
                at(out_free[0] + 0.5, "done", read)
            start_die(t, die)
            start_channel(t, die % channels)
        else:
            latencies.append(t - submitted.pop(data))
            submit(t)
    kept = sorted(latencies[reads // 5:])
    mean = sum(kept) / len(kept)
    return qd / mean * 1e3, mean, kept[int(len(kept) * 0.99)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--command-phase-us", type=float, default=0.0,
                        help="channel time each read takes to send its command before the sense (0: none)")
    parser.add_argument("--data-first", action="store_true", help="a channel moves data before sending commands")
    parser.add_argument("--release-die", action="store_true",
                        help="a die is free once it has sensed, not once its channel has moved the data")
    parser.add_argument("--command-on-die", action="store_true",
                        help="the command phase holds the die before the sense, not the channel")
    parser.add_argument("--processor-us", type=float, default=None,
                        help="the processor's fixed time per read (default: the preset's 1.197 us, or none with a "
                             "command phase)")
    parser.add_argument("--processor-per-4k-us", type=float, default=0.0,
                        help="with --processor-us, the processor's time per 4 KiB read")
    args = parser.parse_args()
    print("KiB  QD   KIOPS model (drive)   mean us model (drive)   p99 us model (drive)")
    for kib, by_qd in MEASURED.items():
        for qd, (kiops, mean, p99) in by_qd.items():
            model = run(qd, kib, args, reads=5000 if qd == 1 else 30000)
            print(f"{kib:3} {qd:4} {model[0]:7.1f} ({kiops:6.1f}) {model[1]:9.1f} ({mean:7.1f}) "
                  f"{model[2]:9.1f} ({p99:7.1f})")


if __name__ == "__main__":
    main()
