"""Figures and tables computed from the results store: the store as DataFrames (``frames``),
95% t-intervals (``stats``), matplotlib plumbing (``plotting``), one module per figure
family, and the HTML report (``report``)."""
