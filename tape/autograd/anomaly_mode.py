"""Anomaly detection, as torch.autograd.anomaly_mode. While it is on, every
op keeps the stack of its forward call, and backward walks the graph in
Python, checking each gradient a node returns: a nan raises PyTorch's
"Function 'XBackward0' returned nan values in its 0th output." after a
warning that shows where that node's op was called."""
import warnings

from .._grad_mode import _Mode
from .._tape import anomaly

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled"]


def is_anomaly_enabled():
    return anomaly.enabled


def is_anomaly_check_nan_enabled():
    return anomaly.check_nan


class _AnomalyMode(_Mode):
    """Saves and restores the (global) anomaly mode around a block."""

    def __enter__(self):
        self._saved = (anomaly.enabled, anomaly.check_nan)
        anomaly.enabled, anomaly.check_nan = self.mode, self.check_nan

    def __exit__(self, *exc):
        anomaly.enabled, anomaly.check_nan = self._saved


class detect_anomaly(_AnomalyMode):
    """Context manager and decorator: anomaly detection on inside it.

    >>> import tape
    >>> x = tape.tensor([0.0, 1.0], requires_grad=True)
    >>> with tape.autograd.detect_anomaly():
    ...     (x.sqrt() * 0).sum().backward()
    Traceback (most recent call last):
    ...
    RuntimeError: Function 'SqrtBackward0' returned nan values in its 0th output.
    """

    def __init__(self, check_nan=True):
        self.mode, self.check_nan = True, check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and "
                      "should only be enabled for debugging.", UserWarning, stacklevel=2)

    def clone(self):
        clone = _AnomalyMode()
        clone.mode, clone.check_nan = self.mode, self.check_nan
        return clone


class set_detect_anomaly(_AnomalyMode):
    """Turn anomaly detection on or off now; as a context manager, the mode
    before it comes back at the end of the block."""

    def __init__(self, mode, check_nan=True):
        self._saved = (anomaly.enabled, anomaly.check_nan)
        self.mode, self.check_nan = bool(mode), check_nan
        anomaly.enabled, anomaly.check_nan = self.mode, check_nan

    def __enter__(self):
        pass

    def clone(self):
        return self.__class__(self.mode, self.check_nan)
