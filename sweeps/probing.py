"""Probing (003 §3, App. D; 000 §4.4): a linear classifier on the mean-pooled hidden
states of layer k of the frozen pretrained encoder, k = 0 (embeddings) .. L, trained 10
epochs on the full train split.

The same as `reinit-tune sweep probing`; `--help` lists the flags."""

import sys

from reinit_tune.cli import sweep_main

if __name__ == "__main__":
    sys.exit(sweep_main("probing", prog="python sweeps/probing.py"))
