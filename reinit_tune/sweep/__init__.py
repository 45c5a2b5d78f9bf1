"""Running sweeps: typed run options (``options``), planning a grid against the store and
pre-flight checks (``plan``, ``preflight``), the cost estimate (``cost``), the Ray cluster
and the process environment (``cluster``, ``environment``), one trial as a Tune trainable
(``trial``), Tune's searcher and the store-writer callback (``searcher``, ``writer``),
launching on Tune (``launch``) and the one orchestrator every entry point runs (``runner``:
``Sweep``, ``run_sweep``, returning a ``summary.SweepSummary``)."""
