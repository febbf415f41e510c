"""The operator library of `tape`. Every op is declared once, in the module of
its kind (Note [Op declarations] in ops/_declare.py); importing this package
imports them all and makes their exports: tape.<name>, tape.linalg.<name>,
the Tensor methods and vmap's batching rules.
"""
from tape import _registry

from ops import (comparison, creation, elementwise, inplace, linalg, logical, matrix, reduction, selection,  # noqa: F401
                 shape, sorting)
from ops._declare import PUBLIC, export_all

__all__ = export_all()
globals().update(PUBLIC["tape"])
_registry.seal()  # last: the face fills itself then (Note [The face])
