"""zonelab's Python package against the command line it wraps, locally and on a Dask LocalCluster.

ZONELAB_BIN names the zonelab binary to compare with (the Rust test that runs this file sets it)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import zonelab

ZONELAB = os.environ.get("ZONELAB_BIN", "zonelab")
ARGS = "--name=r --rw=randread --bs=4k --ioengine=io_uring --runtime=5ms --time_based"
GRID = {"args": ARGS, "seeds": [1, 2], "axes": {"filename": ["preset:zn540", "preset:conventional"], "iodepth": [1, 16]}}


def without_clock(document):
    """fio's JSON without the wall-clock fields (when it ran, how long the simulation took), which differ between
    any two runs."""
    document = {key: value for key, value in document.items() if key not in ("time", "timestamp", "timestamp_ms")}
    for job in document["jobs"]:
        job["zonelab"].pop("wall")
    return document


def test_fio_gives_the_json_zonelab_fio_prints():
    args = ["--name=w", "--filename=preset:zn540,zones=8", "--rw=write", "--bs=64k", "--size=2z", "--zonemode=zbd"]
    cli = subprocess.run([ZONELAB, "fio", *args, "--output-format=json"], capture_output=True, text=True, check=True)
    assert without_clock(zonelab.fio(*args)) == without_clock(json.loads(cli.stdout))
    keywords = zonelab.fio(name="w", filename="preset:zn540,zones=8", rw="write", bs="64k", size="2z", zonemode="zbd")
    assert without_clock(keywords) == without_clock(json.loads(cli.stdout))


def test_bad_options_and_refused_commands_are_exceptions():
    with pytest.raises(zonelab.ZonelabError, match="bogus"):
        zonelab.fio("--name=x", "--rw=bogus")
    device = zonelab.Device("preset:zn540,zones=4")
    assert device.write(0, bytes(4096)) > 0
    assert device.report()[0]["wp_lba"] == 1
    with pytest.raises(zonelab.DeviceError) as refused:
        device.write(0, bytes(4096))
    assert refused.value.args == (0x1BC, "Zone Invalid Write (0x1bc)")
    lba, took = device.append(1, b"\x07" * 8192)
    assert (lba, device.read(lba, 2)[0]) == (device.geometry["zone_size_lba"], b"\x07" * 8192) and took > 0
    device.reset(1)
    assert device.report()[1]["state"] == "empty"
    with pytest.raises(zonelab.ZonelabError, match="zone 9 does not exist"):
        device.finish(9)
    with pytest.raises(zonelab.ZonelabError):
        zonelab.Device("preset:no-such-preset")
    # The conventional namespace has no zones: its report is refused, not the zoned namespace's zones.
    with pytest.raises(zonelab.DeviceError) as refused:
        zonelab.Device("preset:zn540,ns=1").report()
    assert refused.value.args[0] == 0x1


def test_a_sweep_is_the_command_lines_table_typed(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(
        f'args = "{ARGS}"\nseeds = [1, 2]\n[axes]\nfilename = ["preset:zn540", "preset:conventional"]\niodepth = [1, 16]\n'
    )
    csv, parquet = tmp_path / "cli.csv", tmp_path / "cli.parquet"
    subprocess.run([ZONELAB, "sweep", str(grid), "--out", str(csv), "--parquet", str(parquet)], check=True)
    frame = zonelab.sweep(GRID)
    assert len(frame) == 8 and frame["error"].isna().all()
    assert (frame["iodepth"].dtype, frame["seed"].dtype, frame["read_kiops"].dtype) == ("int64", "int64", "float64")
    cli = pd.read_csv(csv).sort_values(["point", "job"]).reset_index(drop=True)
    mine = frame.sort_values(["point", "job"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, cli, check_dtype=False)
    # The command line's Parquet: the same table, typed (integers as integers, measures as doubles).
    columnar = pd.read_parquet(parquet).sort_values(["point", "job"]).reset_index(drop=True)
    assert (columnar["iodepth"].dtype, columnar["read_kiops"].dtype) == ("int64", "float64")
    pd.testing.assert_frame_equal(mine, columnar, check_dtype=False)
    # More queue depth, more reads: the numbers are the model's, not zeros.
    zn540 = frame[frame["filename"] == "preset:zn540"].groupby("iodepth")["read_kiops"].mean()
    assert zn540[16] > 2 * zn540[1]


def test_a_failing_point_is_a_row_and_bad_grids_are_refused(tmp_path):
    frame = zonelab.sweep({"args": ARGS, "axes": {"filename": ["preset:zn540"], "iodepth": [1, "many"]}})
    failed = frame[frame["error"].notna()]
    assert len(frame) == 2 and len(failed) == 1 and "iodepth" in failed["error"].iloc[0]
    with pytest.raises(zonelab.ZonelabError, match="unknown field"):
        zonelab.sweep({"args": ARGS, "axis": {"iodepth": [1]}})
    with pytest.raises(zonelab.ZonelabError, match="iodepth"):
        zonelab.sweep({"args": ARGS, "axes": {"iodepth": []}})
    table = tmp_path / "other.csv"
    table.write_text("point,something\n")
    with pytest.raises(zonelab.ZonelabError, match="columns"):
        zonelab.sweep(GRID, table=table)


def test_a_killed_sweep_resumes_without_running_a_point_twice(tmp_path):
    table = tmp_path / "table.csv"
    grid = {"args": ARGS.replace("5ms", "40ms"), "seeds": [1, 2, 3], "axes": {"iodepth": [1, 4, 16, 64]}}
    script = f"import zonelab; zonelab.sweep({grid!r} | {{'axes': {{'filename': ['preset:zn540'], **{grid['axes']!r}}}}}, table={str(table)!r}, jobs=1)"
    child = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    while time.time() < deadline and (not table.exists() or len(table.read_text().splitlines()) < 3):
        time.sleep(0.01)
    child.kill()
    child.wait()
    before = pd.read_csv(table)
    assert 2 <= len(before) < 12, "killed midway"
    grid["axes"] = {"filename": ["preset:zn540"], **grid["axes"]}
    frame = zonelab.sweep(grid, table=table)
    after = pd.read_csv(table)
    assert len(frame) == len(after) == 12
    assert after["point"].is_unique, "no point ran twice"
    assert after.iloc[: len(before)].equals(before), "what the killed sweep wrote stays"


def test_a_torn_table_drops_its_torn_row_and_glues_none(tmp_path):
    table = tmp_path / "table.csv"
    zonelab.sweep(GRID, table=table)
    whole = table.read_bytes()
    table.write_bytes(whole[:-40])
    grid = {**GRID, "axes": {**GRID["axes"], "iodepth": [1, 16, 4]}}
    frame = zonelab.sweep(grid, table=table)
    after = pd.read_csv(table)
    assert len(frame) == len(after) == 12
    assert after["point"].is_unique and after["error"].isna().all()


def test_dask_runs_the_same_rows_as_this_process(tmp_path):
    distributed = pytest.importorskip("distributed") if os.environ.get("CI") != "true" else __import__("distributed")
    local = zonelab.sweep(GRID)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            remote = zonelab.sweep(GRID, client=client, parquet=tmp_path / "table.parquet")
    pd.testing.assert_frame_equal(local, remote)
    parquet = pd.read_parquet(tmp_path / "table.parquet")
    assert list(parquet.columns) == list(local.columns) and len(parquet) == len(local)


def test_an_experiment_gives_its_claims_and_series():
    assert "zwal-append-scaling" in zonelab.experiments()
    results = zonelab.experiment("zwal-append-scaling", quick=True)
    claims, series = results["claims"], results["series"]
    assert {"figure", "text", "paper", "zonelab", "verdict"} <= set(claims.columns) and len(claims) >= 1
    assert set(series["figure"]) >= set(claims["figure"]) and series["y"].gt(0).all()
    assert results["report"].startswith("# ")
    with pytest.raises(zonelab.ZonelabError, match="no-such"):
        zonelab.experiment("no-such")


def test_the_plot_example_runs(tmp_path):
    example = Path(__file__).resolve().parents[2] / "examples" / "python" / "sweep_plot.py"
    png = tmp_path / "plot.png"
    out = subprocess.run([sys.executable, str(example), str(png)], capture_output=True, text=True, check=True)
    means = pd.DataFrame(json.loads(out.stdout))
    assert png.stat().st_size > 10_000 and len(means) == 16 and means["read_kiops"].gt(0).all()
