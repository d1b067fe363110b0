"""A user's Python file imported by its path: the one way every spec that names a file
is loaded (langgraph.json's graphs ``./src/agent/graph.py:graph``, ``auth.path``,
``store.index.embed``; ``--graph``).

The module gets a name of its own (the caller's prefix and the path's hash), so that two
files of the same name never replace each other in :data:`sys.modules`; its folder joins
the import path, as the Agent Server lets a file import its siblings. A file that fails
while it runs is taken out of :data:`sys.modules` again and its exception raised as it
is: each caller says what the file was for.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def import_file(path: Path, prefix: str) -> ModuleType:
    """The module the Python file at ``path`` (resolved, existing) defines, run once and
    registered as ``{prefix}_{hash}``; ImportError when Python cannot load such a file."""
    name = f"{prefix}_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"Python cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
