"""Comparing two models: the measures as pure functions on tensors (``measures``), their
per-layer application to two encoders (``layers``), and comparing two saved models on dev
examples (``compare``, the ``reinit-tune compare`` command)."""
