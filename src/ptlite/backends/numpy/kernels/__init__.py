"""The NumPy reference kernels, one module per operator family (`ptlite/ops/<family>.py` declares what
`<family>.py` here implements); private modules (`_*.py`) hold what several families share.

Importing a family module registers its kernels (`ptlite.backends.numpy.kernel`); importing this package
registers nothing: the backend imports a family the first time one of its operators is needed.
"""
