"""Routers: ``write`` (commands), ``read`` (queries) and ``health``; deployable apart."""
