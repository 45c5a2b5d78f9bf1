"""Figures and tables computed from the results store (R2, R3): one module per figure family."""
