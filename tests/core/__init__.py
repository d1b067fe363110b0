"""relay's own top-level modules: the Relay (subscribe), settings, the event encoding, the
optional extras, lifecycles.
"""
