"""Sweep throughput in this process and on a Dask LocalCluster: the figures docs/sweeps.md quotes.

    python3 examples/python/bench_dask.py [POINTS] [RUNTIME]      (default 1000 points of 1ms)

Runs POINTS fio points (4 KiB random reads on zn540 at QD 4 for RUNTIME of device time, each its own seed) four
ways and prints points per second for each: in this process on one thread; on a LocalCluster of one
single-threaded worker process; on one of two; and the Dask path's cost per point (one worker against one
thread in process). Build the package optimized (pip install ./python) before quoting its figures.
"""

import json
import sys
import time

from distributed import Client, LocalCluster

import zonelab


def grid(points: int, runtime: str) -> dict:
    return {
        "args": "--name=r --filename=preset:zn540 --rw=randread --bs=4k --iodepth=4 --ioengine=io_uring "
        f"--runtime={runtime} --time_based",
        "seeds": list(range(1, points + 1)),
        "axes": {},
    }


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    points = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    runtime = sys.argv[2] if len(sys.argv) > 2 else "1ms"
    work = grid(points, runtime)
    figures = {"points": points, "runtime": runtime}
    figures["in_process_1_thread_s"] = timed(lambda: zonelab.sweep(work, jobs=1))
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            with Client(cluster) as client:
                zonelab.sweep(grid(workers * 4, runtime), client=client)  # warm the workers: imports, first point
                figures[f"dask_{workers}_workers_s"] = timed(lambda: zonelab.sweep(work, client=client))
    for key in ("in_process_1_thread", "dask_1_workers", "dask_2_workers"):
        figures[f"{key}_points_per_s"] = round(points / figures[f"{key}_s"], 1)
    figures["dask_2_over_1_workers"] = round(figures["dask_1_workers_s"] / figures["dask_2_workers_s"], 3)
    figures["dask_cost_per_point_ms"] = round(
        (figures["dask_1_workers_s"] - figures["in_process_1_thread_s"]) / points * 1000, 3
    )
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
