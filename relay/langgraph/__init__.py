"""Any compiled LangGraph graph as turns (the next step: GraphAgent, the instrumentation
for any graph, its topology)."""
