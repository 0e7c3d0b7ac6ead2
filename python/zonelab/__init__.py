"""zonelab, a ZNS SSD laboratory, from Python.

Everything here runs zonelab's simulation in virtual time inside this process (the Rust core is the
extension module ``zonelab._native``), deterministically: the same arguments and seed give the same numbers.

- :func:`fio` runs one fio invocation, as ``zonelab fio`` takes it, and returns fio's JSON document as a dict.
- :func:`sweep` runs a grid of fio options and seeds (as ``zonelab sweep`` does) on every core, or on a Dask
  cluster, and returns one tidy :class:`pandas.DataFrame` row per point and fio job.
- :func:`experiment` runs one of the papers' experiments and returns its claims and series as DataFrames.
- :class:`Device` drives a device one NVMe command at a time.

Errors are exceptions: :class:`ZonelabError` for a bad option, grid or spec (the message names what is
wrong), :class:`DeviceError` (a subclass) when the device refuses a command, with the NVMe status code and its
name in ``args``.
"""

from __future__ import annotations

import concurrent.futures
import csv
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

from . import _native
from ._native import DeviceError, ZonelabError

__version__: str = _native.VERSION.removeprefix("zonelab-")
__all__ = ["fio", "sweep", "experiment", "experiments", "Device", "ZonelabError", "DeviceError"]

Grid = Union[str, os.PathLike, Mapping[str, Any]]


def _option(key: str, value: Any) -> str:
    if value is True:
        return f"--{key}"
    return f"--{key}={value}"


def fio(*args: str, **options: Any) -> Dict[str, Any]:
    """Run one fio invocation in virtual time and return fio's JSON output as a dict.

    Positional arguments are fio's command line as ``zonelab fio`` takes it (``"--name=a"``,
    ``"--rw=randread"``); keyword arguments are options after them, in order: ``name="a"`` is ``--name=a``, and
    ``True`` is an option without a value (``time_based=True``). As on fio's command line, options before the
    first ``name`` are global; those after it belong to that job.

    >>> result = fio(name="r", filename="preset:zn540", rw="randread", bs="4k", iodepth=8,
    ...              ioengine="io_uring", runtime="20ms", time_based=True)
    >>> result["jobs"][0]["read"]["iops"] > 0
    True

    The document is what ``zonelab fio --output-format=json`` prints for the same arguments.
    Raises :class:`ZonelabError` for options fio would refuse.
    """
    argv = list(args) + [_option(key, value) for key, value in options.items()]
    return json.loads(_native.fio(argv))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def _grid_text(grid: Grid) -> str:
    """A grid's TOML text, from a path, TOML text or a dict with ``args``, ``seeds`` and ``axes``."""
    if isinstance(grid, Mapping):
        lines = []
        for key, value in grid.items():
            if key == "axes":
                continue
            if isinstance(value, (list, tuple)):
                lines.append(f"{key} = [{', '.join(_toml_value(item) for item in value)}]")
            else:
                lines.append(f"{key} = {_toml_value(value)}")
        lines.append("[axes]")
        for axis, values in dict(grid.get("axes", {})).items():
            if not isinstance(values, (list, tuple)):
                raise ZonelabError(f"axis {axis}: give a non-empty list of values")
            lines.append(f"{json.dumps(str(axis))} = [{', '.join(_toml_value(value) for value in values)}]")
        return "\n".join(lines) + "\n"
    if isinstance(grid, os.PathLike) or (isinstance(grid, str) and "\n" not in grid and Path(grid).is_file()):
        return Path(grid).read_text()
    return str(grid)


def _run_point(args: Sequence[str], seed: int) -> Tuple[bool, List[List[str]]]:
    """One point of a sweep, where it runs."""
    return _native.run_point(list(args), seed)


def _run_points(batch: Sequence[Tuple[Sequence[str], int]]) -> List[Tuple[bool, List[List[str]]]]:
    """A batch of points, as one Dask task (a worker imports zonelab to run it)."""
    return [_run_point(args, seed) for args, seed in batch]


def _typed(frame: pd.DataFrame, axes: Sequence[str]) -> pd.DataFrame:
    """Columns as their values are: numbers as numbers (an axis only when every value is one), text as text."""
    frame = frame.copy()
    # A point that ran has no error: missing, as pandas reads the empty field of the CSV table.
    frame["error"] = frame["error"].mask(frame["error"] == "")
    for column in frame.columns:
        if column in ("point", "job", "error"):
            continue
        values = frame[column].mask(frame[column] == "")
        try:
            converted = pd.to_numeric(values)
        except (ValueError, TypeError):
            if column in axes:
                continue
            converted = pd.to_numeric(values, errors="coerce")
        if column in ("seed", "zone_resets") and not converted.isna().any():
            converted = converted.astype("int64")
        frame[column] = converted
    return frame


def _drop_torn_row(table_path: Path) -> None:
    """Cuts a table that does not end in a line break back to its last whole row, from the file too.

    Such a table was cut short (a sweep killed mid-write, a full disk); its torn last row's point then runs
    again, and the next row starts a line of its own instead of being glued to it.
    """
    if not table_path.exists():
        return
    data = table_path.read_bytes()
    if data and not data.endswith(b"\n"):
        with table_path.open("r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)


def sweep(
    grid: Grid,
    client: Any = None,
    *,
    table: Optional[Union[str, os.PathLike]] = None,
    parquet: Optional[Union[str, os.PathLike]] = None,
    jobs: Optional[int] = None,
    batch: Optional[int] = None,
) -> pd.DataFrame:
    """Run every point of a grid and return the tidy table: one row per point and fio job.

    ``grid`` is a grid file's path, its TOML text, or a dict of the same keys (``zonelab sweep`` documents
    the format: ``args``, the fio arguments every point shares; ``seeds``; ``axes``, fio options and their
    values)::

        sweep({"args": "--name=r --rw=randread --bs=4k --ioengine=io_uring --runtime=20ms --time_based",
               "axes": {"filename": ["preset:zn540"], "iodepth": [1, 8, 32]}})

    Points run in this process on ``jobs`` threads (default: every core), or, with a
    ``dask.distributed.Client`` as ``client``, on its workers (any deployment Dask supports), ``batch`` points a
    task (default: about eight tasks a worker); the rows are the same either way, order aside, and are returned
    in the grid's order. Columns: ``point`` (the point's key, a
    hash of its arguments, seed and zonelab's version), the axes, ``seed``, then ``job``, ``error`` and the
    measures (read and write KIOPS, MiB/s, mean and p50/p99/p99.9 latency in microseconds, the device's write
    amplification, energy in joules, zone resets), typed.

    With ``table`` (a CSV file, as ``zonelab sweep --out`` writes it), points the table holds are not run again
    and each new point's rows are appended as soon as it (or, on Dask, its batch) finishes, so a sweep that is
    stopped resumes where it stopped. A point that fails becomes a row with its ``error``; the sweep goes on. With ``parquet``, the whole
    table is also written as Parquet (pyarrow).
    """
    axes, points = _native.grid_points(_grid_text(grid))
    header = ["point", *axes, "seed", *_native.measures()]
    rows: List[List[str]] = []
    done = set()
    table_path = Path(table) if table is not None else None
    if table_path is not None:
        _drop_torn_row(table_path)
    if table_path is not None and table_path.exists() and table_path.stat().st_size > 0:
        with table_path.open(newline="") as file:
            reader = csv.reader(file)
            columns = next(reader, None)
            if columns != header:
                raise ZonelabError(
                    f"{table_path}: its columns are {columns}, not this grid's {header}: write to another table"
                )
            for row in reader:
                rows.append(row)
                done.add(row[0])
    todo = [point for point in points if point[0] not in done]
    lock = threading.Lock()

    def record(point: Tuple[str, List[str], int, List[str]], result: Tuple[bool, List[List[str]]]) -> None:
        key, values, seed, _ = point
        new = [[key, *values, str(seed), *measures] for measures in result[1]]
        with lock:
            rows.extend(new)
            if table_path is not None:
                fresh = not table_path.exists() or table_path.stat().st_size == 0
                with table_path.open("a", newline="") as file:
                    writer = csv.writer(file, lineterminator="\n")
                    if fresh:
                        writer.writerow(header)
                    writer.writerows(new)

    if client is not None:
        from distributed import as_completed

        # A task costs Dask's scheduler a few milliseconds, more than a short point: points go in batches, about
        # eight a worker, so that the workers, not the scheduler, set the pace.
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        size = batch or max(1, len(todo) // (workers * 8))
        batches = [todo[start : start + size] for start in range(0, len(todo), size)]
        futures = client.map(
            _run_points,
            [[(point[3], point[2]) for point in group] for group in batches],
            key=[f"zonelab-points-{group[0][0]}-{len(group)}" for group in batches],
            pure=False,
        )
        index = {future.key: group for future, group in zip(futures, batches)}
        for future, results in as_completed(futures, with_results=True):
            for point, result in zip(index[future.key], results):
                record(point, result)
    else:
        workers = jobs or os.cpu_count() or 1
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            running = {pool.submit(_run_point, point[3], point[2]): point for point in todo}
            for future in concurrent.futures.as_completed(running):
                record(running[future], future.result())

    order = {point[0]: position for position, point in enumerate(points)}
    frame = pd.DataFrame(rows, columns=header)
    frame["_order"] = frame["point"].map(order).fillna(len(order))
    frame = frame.sort_values(["_order", "job"], kind="stable").drop(columns="_order").reset_index(drop=True)
    frame = _typed(frame, axes)
    if parquet is not None:
        frame.to_parquet(parquet, index=False)
    return frame


def experiments() -> Dict[str, str]:
    """Every experiment's id and title."""
    return dict(_native.experiments())


def experiment(
    id: str, quick: bool = True, *, jobs: Optional[int] = None, out: Optional[Union[str, os.PathLike]] = None
) -> Dict[str, Any]:
    """Run one experiment (``zonelab experiment run ID``) and return its results.

    Returns a dict: ``claims``, a DataFrame with a row per claim (figure, the paper's words and number,
    zonelab's number, unit, verdict, whether it is settled and fitted, the explanation); ``series``, a long
    DataFrame of every figure's points (figure, series, x, y); ``report``, the report's Markdown; ``out``, the
    directory holding the report, ``results.json`` and the plots (a temporary one unless ``out`` is given).
    Its virtual-time runs use ``jobs`` threads (default: every core). Raises :class:`ZonelabError` for an
    unknown id (``experiments()`` lists them).
    """
    directory = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="zonelab-experiment-"))
    _native.run_experiment(id, quick, str(directory / id), jobs or os.cpu_count() or 1)
    results = json.loads((directory / id / "results.json").read_text())
    claims, series = [], []
    for figure in results["figures"]:
        for claim in figure.get("claims", []):
            claims.append({"figure": figure["id"], **claim})
        for line in figure.get("series", []):
            for point in line.get("points", []):
                series.append({"figure": figure["id"], "series": line["label"], "x": point["x"], "y": point["y"]})
    return {
        "claims": pd.DataFrame(claims),
        "series": pd.DataFrame(series, columns=["figure", "series", "x", "y"]),
        "report": (directory / id / "report.md").read_text(),
        "out": directory / id,
    }


class Device:
    """A device in virtual time, driven one NVMe command at a time.

    ``spec`` is a device spec as every zonelab command takes it: ``"preset:zn540"``, ``"preset:zn540,zones=16"``,
    or a device image's directory (commands then change the image). Each command arrives when the previous one
    completed; each method returns the nanoseconds its command took on the model (``now_ns`` is the clock).

    >>> device = Device("preset:zn540,zones=4")
    >>> device.write(0, bytes(4096)) > 0
    True
    >>> device.report()[0]["wp_lba"]
    1
    """

    def __init__(self, spec: str) -> None:
        self._device = _native.Device(spec)
        self.geometry: Dict[str, int] = json.loads(self._device.geometry_json())

    @property
    def now_ns(self) -> int:
        """The device's virtual time in nanoseconds."""
        return self._device.now_ns

    def write(self, lba: int, data: bytes) -> int:
        """Write ``data`` (whole blocks) at ``lba``, a zone's write pointer."""
        return self._device.write(lba, data)

    def append(self, zone: int, data: bytes) -> Tuple[int, int]:
        """Zone Append ``data`` to ``zone``; returns the LBA it landed at and the nanoseconds it took."""
        return self._device.append(zone, data)

    def read(self, lba: int, blocks: int) -> Tuple[bytes, int]:
        """Read ``blocks`` blocks at ``lba``; returns the bytes and the nanoseconds it took."""
        return self._device.read(lba, blocks)

    def open(self, zone: Optional[int] = None) -> int:
        """Open ``zone`` explicitly (every zone the action applies to with ``None``)."""
        return self._device.zone_action("open", zone)

    def close(self, zone: Optional[int] = None) -> int:
        """Close ``zone``."""
        return self._device.zone_action("close", zone)

    def finish(self, zone: Optional[int] = None) -> int:
        """Finish ``zone``."""
        return self._device.zone_action("finish", zone)

    def reset(self, zone: Optional[int] = None) -> int:
        """Reset ``zone``'s write pointer (every non-empty zone with ``None``)."""
        return self._device.zone_action("reset", zone)

    def report(self) -> List[Dict[str, Any]]:
        """Every zone: ``zone``, ``state``, ``start_lba``, ``wp_lba`` (None where a report hides it) and
        ``capacity_lba``."""
        return json.loads(self._device.report_json())

    def report_frame(self) -> pd.DataFrame:
        """The zone report as a DataFrame."""
        return pd.DataFrame(self.report())
