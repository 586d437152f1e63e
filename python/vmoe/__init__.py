"""vmoe: the user package (numpy only).

This branch holds only `vmoe.importers` (checkpoint importers); the rest of
the package (compile, model API) lives beside it on main.
"""
