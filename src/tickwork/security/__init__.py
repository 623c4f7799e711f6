"""Security adapters: the SSRF guard of http tasks, and token secrets."""
