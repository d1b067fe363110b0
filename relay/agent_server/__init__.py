"""LangGraph's Agent Server API over span-relay's turns, framework-free (issue 34).

LangGraph's own clients (the ``langgraph_sdk`` Python client, ``@langchain/langgraph-sdk``,
``useStream``, agent-chat-ui) speak the Agent Server API; this package is what the
routes of relay/http/agent_server.py need of it, in LangGraph's shapes:

- assistants.py: the served graphs as assistants (ids, search, graph, schemas);
- jsonable.py: values as LangGraph's server writes them (a message as its
  ``model_dump()``, an ``Interrupt`` as ``{value, id}``);
- state.py: a checkpoint as a ``ThreadState``, a thread's status from its latest turn;
- requests.py: a run's request body, read and checked;
- stream.py: a run's turn log as LangGraph's stream modes (``values``, ``updates``,
  ``messages-tuple``, ``custom``), checkpoints read at step boundaries;
- threads.py: a thread row as a ``Thread``, the thread search (filter, sort, page) and
  the bodies of search, count and update;
- store_items.py: the store routes' bodies, each user's namespaces, items as LangGraph's;
- commands.py, protocol_events.py, thread_events.py: LangGraph's streaming protocol
  (``/threads/{id}/commands`` and ``/threads/{id}/stream/events``): its commands, a
  turn's log as its events with durable ids, a thread's events followed turn by turn.

Every run is a span-relay turn, started and resumed through
:class:`relay.turns.admission.Admission`: the run id is the turn id.
"""
