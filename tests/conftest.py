"""Test session setup: one Numba cache shared by every test run, keyed by the
digest of tape's native sources (Note [Native cache] in tape/_native.py), so
a stale cached kernel can never run and a single test file does not pay the
whole compile. A NUMBA_CACHE_DIR set outside (CI sets a fresh one) wins."""
import os
import tempfile

os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(tempfile.gettempdir(), "tape-tests-numba"))
