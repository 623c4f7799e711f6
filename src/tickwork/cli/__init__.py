"""The ``tickwork`` command line (Typer). Client commands use only ``tickwork.sdk.Client``."""
