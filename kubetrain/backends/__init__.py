"""Backends: where jobs run. `base.py` is the interface every one implements and `open_backend`; each
backend is a package of its own (`local/`, `kubernetes/`) and never imports another."""
