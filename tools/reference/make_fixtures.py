"""Generate every parity fixture: runs make(out_dir) of each tools/reference/ref_*.py.

Usage: python3 tools/reference/make_fixtures.py OUT_DIR
Each ref_*.py module writes OUT_DIR/<name>.safetensors files that tests/parity/*.cpp read.
"""
import importlib
import os
import pathlib
import sys

import torch


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    here = pathlib.Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    modules = sorted(p.stem for p in here.glob("ref_*.py"))
    for name in modules:
        importlib.import_module(name).make(out)
    print(f"wrote fixtures from {len(modules)} modules to {out}")


if __name__ == "__main__":
    main()
