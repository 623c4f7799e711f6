"""tickwork: a distributed, highly available job scheduler."""

__version__ = "0.1.0"
