"""From a grid to a plot with zonelab's Python package: random 4 KiB reads over queue depth x I/O scheduler x
preset, swept in virtual time on every core (or on a Dask cluster: pass --dask tcp://HOST:8786), into a pandas
DataFrame, then one line per preset and scheduler with matplotlib.

    python3 examples/python/sweep_plot.py plot.png [--dask ADDRESS] [--parquet table.parquet]

Prints the DataFrame's mean KIOPS by preset, scheduler and queue depth as JSON.
"""

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import zonelab  # noqa: E402

GRID = {
    "args": "--name=r --rw=randread --bs=4k --ioengine=io_uring --runtime=20ms --time_based",
    "seeds": [1],
    "axes": {
        "filename": ["preset:zn540", "preset:conventional"],
        "scheduler": ["none", "mq-deadline"],
        "iodepth": [1, 4, 16, 64],
    },
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("png")
    parser.add_argument("--dask", help="a Dask scheduler's address; points run on its workers")
    parser.add_argument("--parquet", help="also write the table as Parquet")
    args = parser.parse_args()
    client = None
    if args.dask:
        from distributed import Client

        client = Client(args.dask)
    table = zonelab.sweep(GRID, client=client, parquet=args.parquet)
    means = table.groupby(["filename", "scheduler", "iodepth"])["read_kiops"].mean().reset_index()
    figure, axis = plt.subplots(figsize=(6, 4))
    for (preset, scheduler), line in means.groupby(["filename", "scheduler"]):
        axis.plot(line["iodepth"], line["read_kiops"], marker="o", label=f"{preset}, {scheduler}")
    axis.set_xscale("log", base=2)
    axis.set_xlabel("queue depth")
    axis.set_ylabel("4 KiB random reads (KIOPS)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(args.png, dpi=100)
    print(json.dumps(means.to_dict(orient="records")))


if __name__ == "__main__":
    main()
