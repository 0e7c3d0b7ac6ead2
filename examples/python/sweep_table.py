"""Reads a table written by `zonelab sweep` with pandas and prints, as JSON, the mean write and read KIOPS of the
points that ran, by every axis of the grid, and the points that failed with their errors.

    python3 examples/python/sweep_table.py sweep.csv
"""

import json
import sys

import pandas as pd


def summarize(path: str) -> dict:
    # Empty fields are missing values: the measures of a point that failed, the error of one that ran.
    table = pd.read_csv(path)
    axes = list(table.columns[1 : table.columns.get_loc("seed")])
    ran = table[table["error"].isna()]
    means = ran.groupby(axes)[["write_kiops", "read_kiops"]].mean().reset_index()
    return {
        "axes": axes,
        "dtypes": {column: str(table[column].dtype) for column in ["seed", "write_kiops", "device_waf"] + axes},
        "means": means.to_dict(orient="records"),
        "failed": table.loc[table["error"].notna(), axes + ["error"]].to_dict(orient="records"),
    }


if __name__ == "__main__":
    json.dump(summarize(sys.argv[1]), sys.stdout)
