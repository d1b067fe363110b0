"""Tools the agent can call. Side-effecting ones run only after a human approves them."""
