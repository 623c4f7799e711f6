"""Security adapters: the SSRF guard of http tasks and callbacks (``ssrf.py``), private
files, secrets at rest and the masking of secret-looking values."""
