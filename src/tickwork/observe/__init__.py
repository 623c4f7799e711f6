"""Observability at the edges: metrics, health, structured logs, traces.

Everything here wraps a port (``ObservedStore``, ``ObservedBroker``) or serves what other
parts already know (the leader's status, the worker pool's slots); nothing in the scheduler
or the worker branches on whether it is observed. Every metric is defined once, in
``metrics``.
"""
