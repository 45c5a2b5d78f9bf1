"""Models: which checkpoint a name means and its shape (``shape``, no torch), the pure
surgery functions (``surgery``) and building a trial's model (``build``)."""
