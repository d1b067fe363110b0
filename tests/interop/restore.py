"""Put back what an instrumentor patched, whatever its ``uninstrument`` does.

opentelemetry-instrumentation-langchain (OpenLLMetry) 0.62 leaves most of its wrappers
in place after ``uninstrument()`` (``BaseCallbackManager.__init__``, ``Pregel.stream``,
``AgentMiddleware`` hooks, ...): every later test in the process would run with its
callback handler attached. The instrumentor tests restore the patched namespaces from a
snapshot taken before ``instrument()``.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

#: (module, class name or None for the module itself) the LangChain instrumentors patch
PATCHED = (
    ("langchain_core.callbacks.base", "BaseCallbackManager"),
    ("langgraph.pregel.main", "Pregel"),
    ("langgraph.types", "Command"),
    ("langchain.agents.middleware.types", "AgentMiddleware"),
    ("langchain.agents", None),
    ("langchain.agents.factory", None),
    ("langgraph.prebuilt", None),
    ("langgraph.prebuilt.chat_agent_executor", None),
    ("langchain_openai.chat_models.base", "BaseChatOpenAI"),
    ("langchain_openai.llms.base", "BaseOpenAI"),
    ("openai", None),
)


def _targets() -> list[Any]:
    found = []
    for module_name, attr in PATCHED:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        found.append(getattr(module, attr) if attr else module)
    return found


@contextlib.contextmanager
def restored() -> Iterator[None]:
    """Snapshot the patched namespaces; on exit, undo every change made to them."""
    snapshots = [(target, dict(vars(target))) for target in _targets()]
    try:
        yield
    finally:
        for target, before in snapshots:
            now = vars(target)
            for key in [k for k in now if k not in before]:
                with contextlib.suppress(AttributeError, TypeError):
                    delattr(target, key)
            for key, value in before.items():
                if now.get(key) is not value:
                    with contextlib.suppress(AttributeError, TypeError):
                        setattr(target, key, value)
