"""Security adapters: the SSRF guard of http tasks and callbacks (``ssrf.py``)."""
