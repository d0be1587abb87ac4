"""Examples of agents governed by agentops from their own process."""
