"""Any compiled graph as turns (relay/langgraph/): the instrumentation, span helpers,
client tools.
"""
