"""Running sweeps: typed run options (``options``), planning a grid against the store and
pre-flight checks (``plan``, ``preflight``), the cost estimate (``cost``), the Ray cluster
(``cluster``), one trial as a Tune trainable (``trial``) and launching it all (``runner``)."""
