"""Side-by-side benchmark of tickwork's peers on the distributed-mode workloads (W1-W3).

Entry point: ``python bench/peers/run.py``. Contenders (the peers, and later tickwork's
distributed mode) implement :class:`peers.contender.Contender` and register a factory with
:func:`peers.contender.register`.
"""
