"""The Spark layer: the Python data source ``rmq`` and the JVM scan's jar (``jar_path()``)."""

from .jar import jar_path

__all__ = ["jar_path"]
