"""Which destination a snapshot's DEST names: a local folder, a WebHDFS folder or a ``pyarrow.fs`` URI.

Apart from :mod:`.destinations` (the destinations themselves) so that :mod:`.webhdfs`, which builds on them,
is not imported back by them.
"""

from __future__ import annotations

from typing import Mapping, Optional

from ..errors import OptionError
from .destinations import ArrowDestination, Destination, LocalDestination
from .webhdfs import WebHdfsDestination, is_webhdfs_uri

__all__ = ["open_destination"]


def open_destination(dest: str, options: Optional[Mapping[str, str]] = None) -> Destination:
    """A local directory (a path), a WebHDFS folder (``webhdfs://``, ``swebhdfs://``: :mod:`.webhdfs`) or a
    ``pyarrow.fs`` folder (any other ``scheme://`` URI)."""
    if "://" in dest:
        if is_webhdfs_uri(dest):
            return WebHdfsDestination(dest, options)
        return ArrowDestination(dest, options)
    if options:
        raise OptionError(f"DEST {dest!r}: options (-O) are read for s3:// destinations only")
    return LocalDestination(dest)
