"""The graph zoo: graphs nobody here wrote (prebuilt, supervisor, swarm, deep agents, a
hand-written StateGraph), driven by scripted fake models, and what LangGraph itself
reports about each (:mod:`tests.zoo.reference`) to hold a relay's events against."""
