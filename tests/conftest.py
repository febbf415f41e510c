"""Test session setup: a fresh Numba cache per session, so a stale cached
kernel can never hide a bug (STYLE.md)."""
import os
import tempfile

os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="tape-numba-")
